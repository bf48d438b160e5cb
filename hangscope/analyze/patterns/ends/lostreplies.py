"""A reply that never comes: a front end waits for replies while every process that could
send them waits for new work.

A front end (a serving engine's tokenizer manager, where clients' requests wait) that blocks
in its event loop inside the program's own synchronous call (``run_until_complete`` called
from the program's frame, as ``Engine.generate`` does; ``asyncio.run`` at a script's top is a
server's loop, not a call awaiting a result) is waiting for the results of the coroutines it
started. Every process its sockets connect it to can send those results; where each of them
waits for its next message (idle, nothing computing, stopped or blocked in a lock), nobody is
working on the request: its reply was lost or routed to another process (sglang#33858: an
abort routed to tokenizer worker 0, which logged "unknown rid ..., dropping"). The waiting
front end is where the user's request is stuck: the suspect, helper or not.

A server is the same front end while a client waits on it: a process that listens on a TCP
port, its loop parked (engines.serving_thread), holding a connection it accepted whose other
end a process blocks reading (a graph edge: the client waits for the answer, a kernel fact a
keep-alive connection lacks). Its handler awaits a future that a receive loop would set (an
SGLang TokenizerManager inside the HTTP server); with every backend idle, that reply is lost.
A backend whose wait leads out of the job (a TCP edge to another host) is not idle: the
answer may still come from there.
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.progress import PROGRESSING, SLOW, STUCK
from hangscope.analyze.evidence.visitors import visitors
from hangscope.analyze.graph.waitwalk import Graph, site_words
from hangscope.analyze.patterns.calm.engines import (
    may_serve,
    python_names,
    serving_thread,
    waits_for_message,
)
from hangscope.frameworks import SERVER_LOOP_FILES
from hangscope.frameworks.zmq import FRAMEWORK as ZMQ
from hangscope.model import Process, Role, Snapshot, Thread
from hangscope.model.waits import SYSCALLS, ProcessFds, WaitPattern, port_of
from hangscope.words import who

#: The roles of a front end: where an engine's clients' requests wait for their replies.
FRONT_ROLES = frozenset({Role.TOKENIZER, Role.MAIN, Role.OTHER})
#: The event loop run inside a call: the frame whose caller waits for its result.
_RUN = re.compile(r"^(?:\S+\.)?run_until_complete \((?:[^)]*/)?asyncio/base_events\.py\)")
#: A log line that says a message was thrown away (an unknown id, a dropped reply).
_DROPPED = re.compile(r"\b(?:unknown|unexpected|dropp|discard|ignor)", re.IGNORECASE)
#: CPU (% of one core) under which a process is taken as waiting.
_WAITING_CPU = 5.0


def awaits_own_call(thread: Thread | None) -> bool:
    """The thread's event loop runs inside ``run_until_complete`` called from the program's
    own frame (not asyncio's runner, nor a server framework's serve call: aiohttp's
    ``web.run_app`` runs its loop so, for the server's life): a synchronous call that waits
    for a result."""
    names = python_names(thread) if thread is not None else []
    k = next((i for i, n in enumerate(names) if _RUN.search(n)), None)
    return k is not None and k + 1 < len(names) and "asyncio/" not in names[k + 1] and not any(
        part in names[k + 1] for part in SERVER_LOOP_FILES)


def _peers(snap: Snapshot, pid: int) -> set[int]:
    """The processes holding the other end of ``pid``'s Unix or TCP connections."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    mine = kernel.process(pid) if kernel is not None else None
    if kernel is None or mine is None:
        return set()
    holders: dict[int, set[int]] = {}
    for pf in kernel.processes:
        for rec in pf.fds:
            if rec.target.startswith("socket:") and rec.inode is not None:
                holders.setdefault(rec.inode, set()).add(pf.pid)
    peer = {u.inode: u.peer for u in kernel.unix_peers if u.listener is None}
    tcp = {(c.local, c.remote): c.inode for c in kernel.tcp}
    ends = {c.inode: (c.remote, c.local) for c in kernel.tcp}
    found: set[int] = set()
    for rec in mine.fds:
        other = peer.get(rec.inode or -1)
        if other is None and (rec.inode or -1) in ends:
            other = tcp.get(ends[rec.inode or -1])
        found |= holders.get(other, set()) if other is not None else set()
    return found - {pid}


def _port(addr: str) -> int:
    return port_of(addr) or 0


def _served_ports(mine: ProcessFds, front: Process, loop: Thread) -> set[int]:
    """The TCP ports ``front`` listens on whose listening socket the server loop's epoll
    watches: the ports it serves. Another of its listeners belongs to another thread (a
    collective transport's own loop: gloo's, whose peer ranks keep a connection to it); where
    the loop's epoll is not read, every listener."""
    ports = {s.inode: s.port for s in front.listening
             if s.kind in ("tcp", "tcp6") and s.port and s.inode is not None}
    call = mine.syscall(loop.tid)
    if call is None or not call.watched:
        return set(ports.values())
    watched = {fd for fd, _ in call.watched}
    return {ports[r.inode] for r in mine.fds if r.fd in watched and r.inode in ports}


def waiting_clients(g: Graph, front: Process, loop: Thread) -> list[int]:
    """The processes blocked reading a connection that ``front`` accepted on a port its server
    loop (thread ``loop``) serves: clients whose request is in flight (none where ``front``
    serves no TCP port)."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    mine = kernel.process(front.pid) if kernel is not None else None
    ports = _served_ports(mine, front, loop) if mine is not None else set()
    if kernel is None or mine is None or not ports:
        return []
    held = {rec.inode for rec in mine.fds if rec.inode is not None}
    accepted = {f"{c.remote}|{c.local}" for c in kernel.tcp
                if c.inode in held and _port(c.local) in ports}
    waiting = {e.pid for e in g.edges if e.kind == "tcp" and e.to_pid == front.pid} - {
        front.pid}
    # the client's end of an accepted connection: its local and remote swapped
    ends = {c.inode: f"{c.local}|{c.remote}" for c in kernel.tcp}
    clients = {pf.pid for pf in kernel.processes if pf.pid in waiting and any(
        ends.get(rec.inode or -1) in accepted for rec in pf.fds)}
    return sorted(clients)


def _front(g: Graph, proc: Process, servers: set[int],
           guests: frozenset[int]) -> tuple[Thread, list[int]] | None:
    """The thread where ``proc`` waits for replies as a front end, and the clients waiting on
    it: a tokenizer's synchronous call, or a server with a request in flight. ``servers``:
    the ids of the processes with a thread in a server loop (asked once per distinct stack)."""
    # (a tokenizer, or the program's own script doing its work: an offline engine's script
    # is its tokenizer; not a launcher, whose loop may serve requests one by one, nor a
    # visitor, a client of the job that asks it in its own loop)
    if proc.role in FRONT_ROLES and proc.pid not in guests and (awaits_own_call(
            proc.working_thread) or _unread_reply(g.snap, proc)):
        return proc.working_thread, []
    served = serving_thread(proc) if id(proc) in servers else None
    clients = waiting_clients(g, proc, served) if served is not None else []
    return (served, clients) if served is not None and clients else None


def _runner_caller(thread: Thread | None) -> str | None:
    """The program's frame that runs the thread's event loop through asyncio's runner
    (``asyncio.run``), as ``func (file)``; None where the loop runs otherwise."""
    names = python_names(thread) if thread is not None else []
    k = next((i for i, n in enumerate(names) if _RUN.search(n)), None)
    if k is None or k + 1 >= len(names) or "asyncio/runners.py" not in names[k + 1]:
        return None
    caller = next((n for n in names[k + 1:] if "asyncio/" not in n), None)
    return None if caller is None or any(part in caller for part in SERVER_LOOP_FILES) \
        else caller


def _per_call(caller: str) -> str:
    """Why a loop that ``asyncio.run`` runs inside a call has no receive task any more."""
    func = caller.split(" (", 1)[0]
    return (f"Its loop runs under asyncio.run, called from {func}: each asyncio.run makes a "
            "new loop and closes it when the call returns, cancelling its tasks, so a receive "
            "task started once, on an earlier call's loop, is gone, and this call's loop has "
            "none (sglang#1606). Keep one loop for every call (a loop on a thread of its own, "
            "or run_until_complete on one loop), or start the receive task on each call's "
            "loop")


def _unread_reply(snap: Snapshot, proc: Process) -> bool:
    """``proc``'s loop runs under asyncio's runner called from the program (``asyncio.run``
    in a function or a script), no task of it receives from its zmq sockets, and one of their
    mailboxes holds a signal nobody took (a message came and sits unread): a front end whose
    receive loop is gone while a reply waits (sglang#1606: a receive task made once, on the
    loop of the first ``asyncio.run``, which that call closed)."""
    thread = proc.working_thread
    if thread is None or _runner_caller(thread) is None:
        return False
    unread = set(unwatched_mailboxes(snap, proc, thread))
    kernel = snap.waits.kernel if snap.waits is not None else None
    mine = kernel.process(proc.pid) if kernel is not None and unread else None
    return mine is not None and any(r.fd in unread and (r.count or 0) > 0 for r in mine.fds)


def _leaves_job(g: Graph, pid: int) -> bool:
    """A thread of ``pid`` waits on a TCP connection to another host: its answer may come."""
    return any(g.edges[i].kind == "tcp" and g.edges[i].to_pid is None
               for i in g.out.get(pid, ()))


def _idle(snap: Snapshot, proc: Process) -> bool:
    """``proc`` waits for its next message, did nothing in the window, and is not stopped. A
    loop that wakes on its timer to look for work and goes back to its poll moves its Python
    lines on next to no CPU (an engine's scheduler between batches): that is no work either."""
    measured = next((r for r in snap.progress.ranks if r.pid == proc.pid),
                    None) if snap.progress is not None else None
    thread = proc.working_thread
    # (its lines moved; the CPU test below still holds) A thread blocked in a poll with no
    # timer, whose lines moved all the same, was woken by events: messages came, and it took
    # them (a healthy engine at a few per cent of a core), which no timer's re-check is.
    polls = measured is not None and measured.decision == PROGRESSING and \
        measured.evidence == "python" and not (thread is not None
                                               and _waits_untimed(snap, proc, thread))
    return not (proc.is_stopped or proc.state == "D" or (proc.cpu_percent or 0.0) >= _WAITING_CPU
                or (measured is not None and measured.decision not in (STUCK, SLOW) and not polls)
                or (thread is not None and not waits_for_message(proc, thread)))


#: A wait's timeout (ms) that no window outlasts: a wait for an event, not a timer's re-check.
_UNTIMED_MS = 60_000


def _waits_untimed(snap: Snapshot, proc: Process, thread: Thread) -> bool:
    """The thread is blocked in ``poll`` or ``epoll_wait`` with no timeout (-1 reads as the
    register's unsigned value) or one no window outlasts: it wakes for events only."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    table = SYSCALLS.get(kernel.arch) if kernel is not None else None
    mine = kernel.process(proc.pid) if kernel is not None else None
    call = mine.syscall(thread.tid) if mine is not None else None
    if table is None or call is None:
        return False
    slot = 2 if call.nr in table.get("poll_ms", ()) else \
        3 if call.nr in table.get("epoll_ms", ()) else None
    return slot is not None and len(call.args) > slot and \
        call.args[slot] & 0xFFFFFFFF >= _UNTIMED_MS


def unwatched_mailboxes(snap: Snapshot, proc: Process, loop: Thread) -> list[int]:
    """The eventfds of ``proc``'s zmq sockets (its mailboxes: the eventfds no zmq I/O thread
    watches) when the loop thread's epoll watches none of them: no task of the loop awaits a
    receive on any zmq socket (a ``zmq.asyncio`` receive registers its socket's mailbox with
    the loop); [] where one is watched, or the facts are missing."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    mine = kernel.process(proc.pid) if kernel is not None else None
    own = {t.tid for t in proc.threads if (t.name or "").startswith(ZMQ.thread_names)}
    call = mine.syscall(loop.tid) if mine is not None else None
    if mine is None or not own or call is None or not call.watched:
        return []
    internal = {fd for c in mine.syscalls if c.tid in own for fd, _ in c.watched}
    boxes = [r.fd for r in mine.fds if r.target == "anon_inode:[eventfd]"
             and r.fd not in internal]
    watched = {fd for fd, _ in call.watched}
    return boxes if boxes and not watched & set(boxes) else []


def lost_reply(g: Graph) -> WaitPattern | None:
    snap = g.snap
    serving = g.having(may_serve)
    servers = {id(p) for p in serving}
    # ``_front`` answers only for a front end's role or a process with a server loop: those,
    # in order (not each of 131,072 ranks); the live processes only where one is found.
    fronts = snap.of_roles(*FRONT_ROLES)
    candidates = (fronts or serving) if not (fronts and serving) else [
        p for p in snap.processes if p.role in FRONT_ROLES or id(p) in servers]
    guests = visitors(snap)
    for front in candidates:
        found = None if front.is_exited else _front(g, front, servers, guests)
        if found is None or not _idle(snap, front):
            continue
        live = [p for p in snap.processes if not p.is_exited]
        thread, clients = found
        senders = [g.procs[pid] for pid in sorted(_peers(snap, front.pid) - set(clients))
                   if pid in g.procs]
        # (the clients wait on the front for the answer: their own wait is no work)
        if not senders or not all(_idle(snap, p) and not _leaves_job(g, p.pid) for p in live
                                  if p.pid not in clients):
            continue
        assert thread is not None
        named = senders
        shown = [who(p) for p in named]
        idle = " and ".join([", ".join(shown[:-1]), shown[-1]] if len(shown) > 1 else shown)
        asked = (f" to the request of {', '.join(f'PID {c}' for c in clients)} (blocked reading "
                 "the connection it accepted)" if clients else "")
        inside = ("its event loop idle with the handler's coroutine parked" if clients else
                  "its event loop run inside that call with the requests' coroutines parked")
        work = front.working_thread
        if clients and work is not None and work.tid != thread.tid:  # a sync handler's thread
            inside += f", its thread {work.name or work.tid} waiting{site_words(work)}"
        # a set title (one word of argv, setproctitle's) names the role; a command line does not
        titled = front.title if front.title and len(front.cmdline) == 1 else ""
        unread = unwatched_mailboxes(snap, front, thread)
        fate = ("whose reply was lost or routed to another process" if not unread else
                "and no task of its event loop receives from its zmq sockets (its epoll "
                f"watches none of their mailboxes, eventfds {', '.join(map(str, unread))}): "
                "the reply sent back to it sits unread. " + (
                    _per_call(caller) if not clients and (caller := _runner_caller(thread)) else
                    "Start the task that receives (its receive loop) before the requests that "
                    "wait for it"))
        chain = (f"{who(front)}{f' ({titled})' if titled else ''} waits for replies"
                 f"{site_words(thread)}{asked}, {inside}; {idle} "
                 f"{'waits' if len(named) == 1 else 'wait'} for new "
                 f"work, not blocked: nothing is working on the request, {fate}")
        said = [line.strip() for p in live if p.pid != front.pid and p.pid not in clients
                for line in p.log_tail if _DROPPED.search(line)]
        if said:
            chain += f"; the log says: {said[-1][:200]!r}"
        return WaitPattern("lost_reply", (front.pid, *(p.pid for p in named)), chain, (),
                           front.pid, thread.tid)
    return None
