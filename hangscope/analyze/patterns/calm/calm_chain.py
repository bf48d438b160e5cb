"""Calm by the wait-for graph: a process blocked only on an idle or paused one is calm too.

analyze/patterns/calm/calm.py finds the roots (a server waiting for its next request; a sleep
between
phases). What waits on them, and on nothing else, waits for work that nobody has asked for
yet, not for an answer that will never come:

- on a *paused* process through any wait (a worker's task socket from an orchestrator asleep
  between phases): it goes on when the sleep ends. Not a socket to a paused process that
  listens: that is a client waiting for a reply from a server asleep in its handler;
- on an *idle* server only by reading a pipe or FIFO it writes (a worker's task pipe, a
  ``multiprocessing.Queue``), or by a server's read of a connection the idle one opened to
  it (a model worker waiting for the router's next request: the worker accepted it on its
  own listening socket); a client reading a socket to an idle server is a client whose
  request was lost (the reply never comes), which stays a hang;
- a ``multiprocessing.Queue`` reader blocked on the queue's read lock waits its turn behind a
  sibling that reads the same queue (the one holding the lock is in the pipe's read): calm when
  that sibling is;
- a child parked on a ``multiprocessing`` Event or Condition (no fd: shared memory) waits for
  its calm parent's next phase.

The waiter must have been blocked the whole window (never woke): a waiter that woke is judged
by its own counters, except a client that polls an idle server over its connection (a long
poll of an empty queue, ``BRPOP queue 1``): it is answered, or times out, and asks again.
Its other ends may be held by its siblings or by the
root's other children (a pipe end inherited at spawn), never by anyone else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hangscope.analyze.evidence.progress import IDLE, PAUSED, SLOW, STUCK
from hangscope.analyze.evidence.progress_hints import joins_threads
from hangscope.analyze.evidence.working import notified_wait
from hangscope.analyze.graph.queueedges import in_queue_get
from hangscope.analyze.graph.threadedges import at_loop_head
from hangscope.analyze.graph.zmqedges import in_zmq_receive, receive_edge
from hangscope.analyze.patterns.calm.engines import idle_stream
from hangscope.analyze.patterns.calm.longpoll import holds_requests_with_deadline
from hangscope.model import Category, Process, Snapshot, Socket, Thread, in_library
from hangscope.model.progress import RankProgress
from hangscope.model.waits import KernelWaits, WaitEdge

_SOCKETS = ("unix", "tcp", "store")


@dataclass(frozen=True)
class Calm:
    """Why a process is calm: its kind (idle or paused) and, if through another, whose."""

    kind: str
    via: int | None = None  # the calm process it waits on (None: a root)
    what: str = ""  # the object it waits on: "pipe 824005 (write end)"
    polls: bool = False  # it asks ``via`` again and again (a long poll), not blocked


def _blocked_window(measured: RankProgress | None, proc: Process | None = None) -> bool:
    """Blocked over the window: the counters saw no wake-up, or one only (a timed wait longer
    than the window that timed out once and waited again: a DataLoader's get, which checks
    its workers every 5 s); a process the window did not watch (one recorder per core), by
    its stacks: its working thread asleep at one stack in every sample."""
    if measured is None:
        thread = proc.working_thread if proc is not None else None
        return (thread is not None and thread.state == "S" and thread.samples > 1
                and thread.unchanged_samples >= thread.samples)
    return (measured.evidence == "counters" and (
        (measured.decision == STUCK and measured.wakes == 0)
        or (measured.decision == SLOW and measured.wakes == 1)))


def _polling(measured: RankProgress | None) -> bool:
    """A timed wait that re-checks: stuck by the counters, yet woken by its own timeout; or
    a blocking socket read that returned again and again (a reply each time: to a client of
    an idle server, ``BRPOP queue 1`` answered nil, the same long poll)."""
    return (measured is not None and measured.evidence == "counters"
            and (measured.wakes or 0) >= 1
            and (measured.decision == STUCK or measured.socket_reads))


def polls_for_work(snap: Snapshot, edge: WaitEdge) -> bool:
    """``edge`` is a socket wait of a thread the window saw polling (woken by its own timeout,
    again and again, at one line): a client asking its server again and again, not one
    blocked on a reply (whether the server is idle is the caller's to check)."""
    if edge.kind not in ("unix", "tcp") or snap.progress is None:
        return False
    measured = next((r for r in snap.progress.ranks if r.pid == edge.pid), None)
    return _polling(measured) and measured is not None and measured.tid in (None, edge.tid)


def _polls_idle_server(proc: Process, edges: list[WaitEdge], procs: dict[int, Process],
                       calm: dict[int, Calm]) -> Calm | None:
    """A client that asks an idle server again and again over one connection (``BRPOP queue
    1`` to a broker, a long poll with a timeout): each request ends and it asks again. It
    waits for work that nobody has queued, not for a reply that never comes (a client whose
    request was lost blocks: it never wakes). Every wait of it must end at idle servers."""
    targets = {e.to_pid for e in edges}
    if None in targets or not edges or any(e.kind not in ("unix", "tcp") for e in edges):
        return None
    servers = [procs[t] for t in targets if t in procs]
    if len(servers) != len(targets) or any(
            calm.get(s.pid) is None or calm[s.pid].kind != IDLE or calm[s.pid].via is not None
            or not s.listening for s in servers):
        return None
    return Calm(IDLE, servers[0].pid, edges[0].object, polls=True)


def _through(snap: Snapshot, edges: list[WaitEdge], target: Process, calm: Calm) -> bool:
    """The waits onto ``target`` are of a kind that waits for work (the module's rules)."""
    onto = [e for e in edges if e.to_pid == target.pid]
    if calm.kind == PAUSED:
        return not (target.listening and any(e.kind in _SOCKETS for e in onto))
    # a client of a long poll: the server holds its request until a deadline, then answers
    polled = holds_requests_with_deadline(snap, target)
    # (a parent waiting for an idle child to exit waits as long as the child idles)
    return all(waits_for_work(snap, e) or e.kind == "child"
               or (polled and e.kind in ("unix", "tcp")) for e in onto)


#: The collectives one rank fans out to the others (its data, its objects).
_FAN_OUT = frozenset({"broadcast", "broadcast_object_list", "scatter", "scatter_object_list"})


def _fanned_out(snap: Snapshot, edge: WaitEdge) -> bool:
    """The waiting rank waits in a collective that its peer fans out to it (a broadcast): a
    tensor-parallel worker's loop waiting for the driver's next request (vLLM's
    ``broadcast_tensor_dict``), which an idle driver has not received yet."""
    proc = next((p for p in snap.processes if p.pid == edge.pid), None)
    thread = next((t for t in proc.threads if t.tid == edge.tid), None) if proc else None
    return thread is not None and thread.op in _FAN_OUT


def _next_item(proc: Process, edge: WaitEdge) -> bool:
    """The reading thread's own code waits at a ``for`` header (``for line in conn_file:``):
    a worker that registered with its server and waits for the next item it is sent, not a
    client waiting for the reply to a request (``f.readline()`` after a write)."""
    return at_loop_head(next((t for t in proc.threads if t.tid == edge.tid), None))


def _straight_line(proc: Process, edge: WaitEdge) -> bool:
    return straight_line(next((t for t in proc.threads if t.tid == edge.tid), None))


def straight_line(thread: Thread | None) -> bool:
    """The thread's program code, every frame of it, stands in no loop of its source
    (``Frame.loops``): it calls this receive once, on its way, and waits for that one message
    (a result, a go-ahead), not for the next request of a loop that serves. A ZMQ socket's
    bind says nothing of who serves (a sink binds its PULL, a controller its PUB), so a bound
    socket is no evidence against it."""
    own = [f for f in thread.frames if not f.native and f.file and not in_library(f.file)
           ] if thread is not None else []
    return bool(own) and not any(f.loops for f in own)


def connected_inodes(kernel: KernelWaits) -> frozenset[int]:
    """The inodes of the job's sockets that are connected: an established TCP connection, a
    Unix socket with a peer."""
    return frozenset({c.inode for c in kernel.tcp if c.state == 1}
                     | {u.inode for u in kernel.unix_peers if u.peer})


def zmq_front_unjoined(kernel: KernelWaits | None, proc: Process, thread: Thread) -> bool:
    """A ZMQ front (a proxy, a ROUTER) that nobody is connected to: its I/O thread owns the
    listening socket, its thread waits for the first message of a client to come; not one
    whose one receive awaits a reply while it holds no connection at all."""
    return (in_zmq_receive(thread) and bool(unconnected_listeners(kernel, proc))
            and not awaits_reply_alone(kernel, proc, thread))


def awaits_reply_alone(kernel: KernelWaits | None, proc: Process, thread: Thread) -> bool:
    """The thread's one zmq receive stands in straight-line code (a reply it awaits, once)
    while its process holds no connection at all: a process that bound an endpoint nobody
    connected to and dialled one that nobody listens on (each process of a pipeline given
    endpoint names of its own) is no front waiting for its first client: what it awaits
    cannot reach it."""
    mine = kernel.process(proc.pid) if kernel is not None else None
    if kernel is None or mine is None or not straight_line(thread):
        return False
    connected = connected_inodes(kernel)
    return not any(r.inode in connected for r in mine.fds)


def unconnected_listeners(kernel: KernelWaits | None, proc: Process) -> list[Socket]:
    """The process's listening sockets that no connection has come to (none accepted, none
    pending: sock_diag's TCP pairs by local port, Unix peers by name): where it waits for
    clients that have not come, or that all left. Empty where the kernel's facts are unread."""
    if kernel is None or not proc.listening:
        return []
    ports = {c.local.rpartition(":")[2] for c in kernel.tcp}
    names = {u.name for u in kernel.unix_peers if u.name}
    return [s for s in proc.listening if not s.pending and (
        (s.kind.startswith("tcp") and s.port and str(s.port) not in ports)
        or (s.kind == "unix" and s.address and s.address not in names))]


def waits_for_work(snap: Snapshot, edge: WaitEdge) -> bool:
    """A wait for the next piece of work: the read of a task pipe or FIFO, a server's read of
    a connection it accepted on its own listening socket (it waits for the client's next
    request; a client reading is waiting for a reply, which an idle peer never sends), or a
    read at the header of the program's own ``for`` loop over a connection (its next item)."""
    if edge.kind in ("pipe", "fifo"):  # a read, or a poll for one: it waits for the writer
        return "read" in edge.how or "(write end)" in edge.object
    if edge.kind == "collective":  # a worker rank's loop waiting for the next request's data
        return _fanned_out(snap, edge)
    if edge.kind == "grpc":  # a stream's next message, from a handler waiting for its event
        target = next((p for p in snap.processes if p.pid == edge.to_pid), None)
        handler = next((t for t in target.threads if t.tid == edge.to_tid), None) \
            if target is not None else None
        return handler is not None and idle_stream(handler)
    if edge.kind not in ("unix", "tcp") or edge.how.startswith(("write", "send")) \
            or edge.fd is None:  # a read, recv or poll of the connection
        return False
    proc = next((p for p in snap.processes if p.pid == edge.pid), None)
    if proc is None:
        return False
    if _next_item(proc, edge):
        return True
    kernel = snap.waits.kernel if snap.waits is not None else None
    if receive_edge(edge) and _straight_line(proc, edge) and not (
            unconnected_listeners(kernel, proc)):
        # a bound PULL or SUB is no server: its one recv awaits one message, unless an
        # endpoint of it has nobody connected (a proxy's front, waiting for its clients)
        return False
    if kernel is None or not proc.listening:  # only a server accepts connections
        return False
    mine = kernel.process(edge.pid)
    rec = next((r for r in mine.fds if r.fd == edge.fd), None) if mine is not None else None
    if rec is None or rec.inode is None:
        return False
    if edge.kind == "unix":
        paths = {s.address for s in proc.listening if s.kind == "unix"}
        return any(u.inode == rec.inode and u.name in paths and u.listener is None
                   for u in kernel.unix_peers)
    ports = {s.port for s in proc.listening if s.kind.startswith("tcp") and s.port}
    return any(c.inode == rec.inode and c.local.rpartition(":")[2].isdigit()
               and int(c.local.rpartition(":")[2]) in ports for c in kernel.tcp)


def _by_graph(snap: Snapshot, proc: Process, edges: list[WaitEdge], procs: dict[int, Process],
              calm: dict[int, Calm]) -> Calm | None:
    targets = {e.to_pid for e in edges if not (e.to_pid == proc.pid and e.to_tid is None)}
    if not targets or None in targets:
        return None  # waits on nothing known, or on something outside the job
    roots = [procs[t] for t in targets if t in calm and t in procs]
    if not roots:
        return None
    kin = {p.pid for p in procs.values() if p.ppid in {proc.ppid, *(r.pid for r in roots)}}
    if not targets - {r.pid for r in roots} <= kin:
        return None  # another end is held by a process that is neither calm nor kin
    if not all(_through(snap, edges, r, calm[r.pid]) for r in roots):
        return None
    # Paused wins: the phase that ends the sleep is what it waits for.
    root = next((r for r in roots if calm[r.pid].kind == PAUSED), roots[0])
    what = next(e.object for e in edges if e.to_pid == root.pid)
    return Calm(calm[root.pid].kind, root.pid, what)


def _fed_by_calm_thread(snap: Snapshot, proc: Process, thread: Thread,
                        edges: tuple[WaitEdge, ...], procs: dict[int, Process],
                        calm: dict[int, Calm]) -> Calm | None:
    """The working thread waits on an in-process hand-off (``queue.Queue.get``, an Event, a
    Condition) while another thread of its process is blocked reading for work from a calm
    process (an engine's input thread in ``recv`` from its idle API server feeding the queue
    the main loop waits on): the main thread waits for what that reader will hand it. Or it
    joins a thread of its own that so waits (a replica's main thread joining its watch
    threads, each waiting for a stream's next update from an idle registry): it waits as
    long as they do."""
    if (notified_wait(thread) is None and not joins_threads(thread)) or any(
            not f.native and (f.file or "").endswith("multiprocessing/synchronize.py")
            for f in thread.frames):
        return None
    named = {e.to_tid for e in edges if e.pid == proc.pid and e.tid == thread.tid
             and e.kind == "thread"}  # its probable feeder (analyze/graph/handoffedges.py)
    for other in proc.threads:
        if other.tid == thread.tid or other.helper or not other.python or (
                named and other.tid not in named):
            continue
        theirs = [e for e in edges if e.pid == proc.pid and e.tid == other.tid]
        why = _by_graph(snap, proc, theirs, procs, calm) if theirs else None
        if why is not None:
            return replace(why, what=f"{why.what}, read by its thread {other.name or other.tid}")
    return None


def _queue_turn(proc: Process, thread: Thread, procs: dict[int, Process],
                calm: dict[int, Calm]) -> Calm | None:
    if thread.category is not Category.LOCK or not in_queue_get(thread):
        return None
    for pid, why in calm.items():
        sibling = procs.get(pid)
        if (sibling is not None and why.via is not None and sibling.ppid == proc.ppid
                and (t := sibling.working_thread) is not None and in_queue_get(t)):
            return Calm(why.kind, pid, "the read lock of the multiprocessing.Queue both read")
    return None


def _parent_signal(proc: Process, thread: Thread, procs: dict[int, Process],
                   calm: dict[int, Calm]) -> Calm | None:
    """A child blocked in a ``multiprocessing`` Event, Condition or Semaphore wait (shared
    memory: no fd names who sets it) whose parent is calm waits for the parent's next phase:
    workers parked on an Event their controller sets when it resumes."""
    parent = procs.get(proc.ppid) if proc.ppid is not None else None
    why = calm.get(parent.pid) if parent is not None else None
    if why is None or thread.category is not Category.LOCK or not any(
            not f.native and (f.file or "").endswith("multiprocessing/synchronize.py")
            for f in thread.frames):
        return None
    return Calm(why.kind, parent.pid, "a multiprocessing Event or Condition its parent sets")


def calm_chain(snap: Snapshot, subjects: list[Process], roots: dict[int, str],
               measured: dict[int, RankProgress]) -> dict[int, Calm]:
    """PID -> why it is calm: the roots, then what waits only on calm processes."""
    calm = {pid: Calm(kind) for pid, kind in roots.items()}
    edges = snap.wait_graph.edges if snap.wait_graph is not None else ()
    procs = {p.pid: p for p in snap.processes}
    changed = True
    while changed:
        changed = False
        for proc in subjects:
            thread = proc.working_thread
            if proc.pid in calm or thread is None:
                continue
            mine = [e for e in edges if e.pid == proc.pid and e.tid == thread.tid]
            if not _blocked_window(measured.get(proc.pid), proc):
                why = (_polls_idle_server(proc, mine, procs, calm)
                       if _polling(measured.get(proc.pid)) else None)
                if why is not None:
                    calm[proc.pid] = why
                    changed = True
                continue
            fed = bool(mine) and all(e.kind == "thread" and e.to_pid == proc.pid
                                     for e in mine)
            why = (_by_graph(snap, proc, mine, procs, calm) if mine and not fed
                   else _queue_turn(proc, thread, procs, calm)
                   or _parent_signal(proc, thread, procs, calm)
                   or _fed_by_calm_thread(snap, proc, thread, edges, procs, calm))
            if why is not None:
                calm[proc.pid] = why
                changed = True
    return calm
