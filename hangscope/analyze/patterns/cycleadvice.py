"""What to do about a cycle of the wait-for graph: one sentence of advice by the kinds of its
waits (a full pipe, a server calling back into itself, captured output read in the wrong
order), read by analyze/patterns/waitpatterns.py's cycle.
"""

from __future__ import annotations

from hangscope.analyze.graph.grpcedges import METADATA
from hangscope.analyze.graph.objectedges import PAUSED_HOW, paused_producer
from hangscope.analyze.graph.owedreply import spoke_last
from hangscope.analyze.graph.queueedges import feeds
from hangscope.analyze.graph.threadedges import at_loop_head, own_frame
from hangscope.analyze.graph.waitwalk import Graph, sends
from hangscope.analyze.graph.zmqedges import OWED_HOW, receive_edge
from hangscope.analyze.patterns.cyclecause import main_rerun, rerun_advice
from hangscope.frameworks.grpc import PLUGIN_CYCLE
from hangscope.frameworks.uvicorn import INHERITED_SIGTERM
from hangscope.model import Thread, in_library
from hangscope.words import who

_ADVICE = {
    ("file_lock",): "take the locks in the same order in every process",
    ("child", "pipe"): "read the child's output while waiting (Popen.communicate(), or drain "
                       "the queue before join())",
    ("pipe", "child"): "read the child's output while waiting (Popen.communicate(), or drain "
                       "the queue before join())",
    ("loop",): "a coroutine blocks the event loop's thread in a synchronous call (join(), "
               "result(), a lock) while the thread it waits for needs that loop to run its "
               "future: await it instead (asyncio.to_thread, loop.run_in_executor)",
}


#: A cycle where a writer blocks on a pipe (its buffer full) read only by a process waiting
#: for that writer, or its shell, to exit.
_FULL_PIPE = ("the pipe is full (its buffer, 64 KiB by default) and its only reader waits "
              "for the child to exit without reading it (Popen.wait() with stdout=PIPE): "
              "read the child's output while waiting (communicate()) or send it to a file")


#: A lock (an open SQLite transaction, an flock) held across a wait for another process that
#: must take that lock before it can answer.
_HELD_ACROSS = ("a process holds a lock while it waits for a reply from a process that needs "
                "that lock first: release it (commit the transaction) before waiting, or "
                "answer without it")
_RETRIED = ("; SQLite's busy handler retries the locked database for ever (a livelock: the "
            "retries look like work, nothing commits)")


def buffered_reply(g: Graph, ring: list[int]) -> int | None:
    """The position in ``ring`` of a Python worker that reads its stdin pipe at the head of
    its request loop while the other side of the ring reads that worker's stdout pipe: it has
    read every request sent and waits for the next, yet its reply has not arrived. Python
    block-buffers stdout on a pipe; a reply printed without a flush stays in that buffer."""
    if len(ring) != 2 or any(g.edges[i].kind != "pipe" for i in ring):
        return None
    for k, i in enumerate(ring):
        edge, other = g.edges[i], g.edges[ring[1 - k]]
        proc, thread = g.procs.get(edge.pid), g.threads.get((edge.pid, edge.tid))
        if proc is None or not proc.python or edge.fd != 0 or not at_loop_head(thread):
            continue
        stdout = _stdout_pipe(g, edge.pid)
        if other.to_pid == edge.pid and stdout is not None and stdout in other.object:
            return k
    return None


def joins_before_draining(g: Graph, ring: list[int]) -> int | None:
    """The position in ``ring`` of a parent's wait for its child (``wait4``, or a poll of the
    pipe whose write end only that child holds: its sentinel, which ends when it exits) while
    a queue feeder of that child is blocked writing a pipe that parent reads: a process that
    put items on a multiprocessing.Queue does not exit until its feeder has written them all,
    so the parent must drain the queue before it joins (python/cpython#73983). The blocked
    feeder may be a sibling's: two writers of one queue, the joined child's feeder waiting
    for the queue's write lock that the sibling's feeder holds while the pipe is full."""
    for k, i in enumerate(ring):
        edge = g.edges[i]
        kid = g.procs.get(edge.to_pid) if edge.to_pid is not None else None
        if kid is None or kid.ppid != edge.pid or edge.kind not in ("child", "pipe") or (
                edge.kind == "pipe" and "(write end)" not in edge.object):
            continue
        if any((w := g.edges[j]).kind == "pipe" and w.to_pid == edge.pid
               and _child_of(g, w.pid, edge.pid) and "(read end)" in w.object
               and feeds(g.threads.get((w.pid, w.tid))) for j in ring):
            return k
    return None


def _child_of(g: Graph, pid: int, parent: int) -> bool:
    proc = g.procs.get(pid)
    return proc is not None and proc.ppid == parent


_DRAIN = ("{parent} waits for its child {child} to exit before it takes what the child put on "
          "its multiprocessing.Queue, but a process that put items does not exit until its "
          "queue's feeder thread has written them all, and the queue's pipe is full "
          "(64 KiB) with only {parent} to read it: get every result from the queue before "
          "join() (the multiprocessing docs' \"joining processes that use queues\")")


def first_cause(g: Graph, ring: list[int]) -> list[int]:
    """``ring`` turned to start at the member whose own act holds it: the one blocked in its
    program's own call, the worker whose reply sits in its stdout buffer, the parent that
    joins a child before draining its queue, the child that SIGTERM did not end, the stage
    of a ring of full queues that sends without reading."""
    for find in (own_call, buffered_reply, joins_before_draining, _term_kept, took_message,
                 sends_unread, main_rerun):
        if (k := find(g, ring)) is not None:
            ring = ring[k:] + ring[:k]
    return ring


def took_message(g: Graph, ring: list[int]) -> int | None:
    """The position in a ring of message waits of the member that spoke last on a TCP
    connection whose other end read all of it and has sent nothing since (tcp_info,
    analyze/graph/owedreply.py): its message came and was taken, not lost; the other holds
    it."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    if kernel is None:
        return None
    ends = {(c.local, c.remote): c for c in kernel.tcp}
    for k, i in enumerate(ring):
        edge = g.edges[i]
        if edge.kind != "tcp" or not receive_edge(edge) or not edge.object.startswith("TCP "):
            continue
        local, _, remote = edge.object[4:].partition(" -> ")
        mine, theirs = ends.get((local, remote)), ends.get((remote, local))
        if mine is not None and theirs is not None and spoke_last(mine, theirs):
            return k
    return None


def sends_unread(g: Graph, ring: list[int]) -> int | None:
    """The position in a ring of full sends of the one stage whose program never reads in
    the loops that hold its send (``Frame.loop_receives``: a front end that sends its whole
    batch, then reads), where every other stage's loop reads too (an event loop): it alone
    takes nothing until it has sent everything."""
    unread: list[int] = []
    if not all(sends(g.edges[i]) for i in ring):
        return None
    for k, i in enumerate(ring):
        thread = g.threads.get((g.edges[i].pid, g.edges[i].tid))
        own = [f for f in thread.frames if not in_library(f.file)] if thread else []
        if not any(f.loop_kind is not None for f in own):
            return None  # its source unread: nothing says it does not read
        if not any(f.loop_receives for f in own):
            unread.append(k)
    return unread[0] if len(unread) == 1 else None


def _waits_for_parent(g: Graph, ring: list[int]) -> int | None:
    """The position in ``ring`` of a parent's wait for its child's exit whose next hop is the
    child's read of a pipe the parent writes (its job queue): each waits for the other."""
    for k, i in enumerate(ring):
        edge, nxt = g.edges[i], g.edges[ring[(k + 1) % len(ring)]]
        if edge.kind == "child" and nxt.pid == edge.to_pid and nxt.to_pid == edge.pid and \
                nxt.kind in ("pipe", "fifo") and "(write end)" in nxt.object:
            return k
    return None


def _term_kept(g: Graph, ring: list[int]) -> int | None:
    """The position of the child's hop where :func:`_waits_for_parent` holds and the child
    catches or ignores SIGTERM: terminate() did not end it, so it is where the cycle holds."""
    k = _waits_for_parent(g, ring)
    if k is None:
        return None
    child = g.procs.get(g.edges[ring[k]].to_pid or -1)
    kept = child is not None and "SIGTERM" in (*child.signals_caught, *child.signals_ignored)
    return (k + 1) % len(ring) if kept else None


def _stop_first(g: Graph, ring: list[int]) -> str | None:
    """The advice where a parent waits for a child that waits for its input, and why
    terminate() did not end the child where its SIGTERM is caught or ignored."""
    k = _waits_for_parent(g, ring)
    if k is None:
        return None
    edge = g.edges[ring[k]]
    parent, child = g.procs[edge.pid], g.procs[edge.to_pid or -1]
    text = _STOP_FIRST.format(parent=who(parent), child=who(child))
    if "SIGTERM" in child.signals_caught:
        text = _CAUGHT.format(child=who(child)) + text
    elif "SIGTERM" in child.signals_ignored:
        text = _IGNORED.format(child=who(child)) + text
    return text


_LOCK_ACROSS_COLLECTIVE = (
    "a thread holds a lock across a collective, and on the other rank the thread that must "
    "make that collective waits for the lock held there by a thread in another collective: "
    "each rank's call waits for a thread of the other rank that waits for the lock. Never "
    "hold a lock across a collective (copy what it guards, release it, then call the "
    "collective), or make the collectives from one thread, in the same order on every rank")
_LOCK_ACROSS_CALL = (
    "a thread holds a lock while it waits for another process's work, and that work calls back "
    "into its process, where the call waits for the same lock (more concurrency does not help). "
    "Release the lock before the wait (stage what it guards under it, then wait), or hand the "
    "other process what it needs instead of having it call back")
_STOP_FIRST = ("{child} waits for what {parent} writes to it (its job queue or pipe) while "
               "{parent} waits for it to exit: tell it to stop before waiting (a sentinel on "
               "its queue, or close the write end), and wait with a timeout, then kill()")
_CAUGHT = ("{child} catches SIGTERM (a handler: SigCgt in /proc status), so terminate() does "
           f"not end it: {INHERITED_SIGTERM}. Restore the default in the child "
           "(signal.signal(SIGTERM, SIG_DFL)) or start it with the spawn context; ")
_IGNORED = ("{child} ignores SIGTERM (SIG_IGN, inherited through fork), so terminate() does "
            "not end it: restore the default in the child (signal.signal(SIGTERM, SIG_DFL)); ")


def own_call(g: Graph, ring: list[int]) -> int | None:
    """The position in ``ring`` of the one member blocked in a call of its program's own code
    (a frame of no library on its stack: a plug-in's HTTP request made inside an engine's
    step) where every other member waits in library code alone (an event loop, an engine's
    message queue): the program's own call is the request that went round."""
    own = [k for k, i in enumerate(ring)
           if (t := g.threads.get((g.edges[i].pid, g.edges[i].tid))) is not None
           and own_frame(t) is not None]
    if len(own) > 1 and all(g.edges[i].kind in _DATA for i in ring):
        # Several, in a ring of data waits (a lock's ring starts at its holder): the one whose
        # own line makes the blocking read itself (only the standard library between them: a
        # dataset's queue.get) before those waiting through a framework's machinery (a
        # DataLoader's main fetching its worker's batch)
        own = [k for k in own if _calls_directly(g.threads[(g.edges[ring[k]].pid,
                                                             g.edges[ring[k]].tid)])]
    return own[0] if len(own) == 1 else None


#: Waits for data through the kernel: pipes, FIFOs, sockets.
_DATA = frozenset({"pipe", "fifo", "unix", "tcp"})
#: Where installed packages live: a frame there is a framework's, not the standard library's.
_PACKAGES = ("/site-packages/", "/dist-packages/")


def _calls_directly(thread: Thread) -> bool:
    """No installed package's frame between the thread's wait and its program's own line."""
    for frame in thread.frames:
        if frame.native:
            continue
        if not in_library(frame.file):
            return True
        if any(p in (frame.file or "") for p in _PACKAGES):
            return False
    return False


def _stdout_pipe(g: Graph, pid: int) -> str | None:
    """``pipe 123 `` of the pipe on ``pid``'s fd 1; None when it is no pipe."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    mine = kernel.process(pid) if kernel else None
    rec = next((r for r in mine.fds if r.fd == 1), None) if mine is not None else None
    return f"pipe {rec.inode} " if rec is not None and rec.target.startswith("pipe:") else None


_BUFFERED = ("{who} has read every request and waits for the next, but its reply never "
             "arrived: Python buffers stdout on a pipe, so a reply print()ed without "
             "flush=True stays in its buffer; flush after each reply (print(..., flush=True)), "
             "or run it with python -u or PYTHONUNBUFFERED=1")


def cycle_advice(g: Graph, ring: list[int], kinds: tuple[str, ...]) -> str:
    if (rerun := rerun_advice(g, ring)) is not None:
        return rerun
    if "file_lock" in kinds and set(kinds) & {"pipe", "fifo", "unix", "tcp"}:
        sqlite = any(g.edges[i].object.startswith("SQLite") for i in ring)
        return _HELD_ACROSS + (_RETRIED if sqlite else "")
    if (k := _paused(g, ring)) is not None:
        return k
    if any(g.edges[i].object == METADATA for i in ring):
        return PLUGIN_CYCLE
    if (k := _stop_first(g, ring)) is not None:
        return k
    if "collective" in kinds and "py_lock" in kinds:
        return _LOCK_ACROSS_COLLECTIVE
    if "py_lock" in kinds and "object" in kinds:
        return _LOCK_ACROSS_CALL
    if (k := joins_before_draining(g, ring)) is not None:
        edge = g.edges[ring[k]]
        assert edge.to_pid is not None
        return _DRAIN.format(parent=who(g.procs[edge.pid]), child=who(g.procs[edge.to_pid]))
    if (k := buffered_reply(g, ring)) is not None:
        return _BUFFERED.format(who=who(g.procs[g.edges[ring[k]].pid]))
    if len(ring) == 2 and all(g.edges[i].kind in ("pipe", "fifo")
                              and "(read end)" in g.edges[i].object for i in ring):
        return _BOTH_WRITE  # each blocked writing the pipe the other reads
    if "child" in kinds and any(g.edges[i].kind in ("pipe", "fifo")
                                and "(read end)" in g.edges[i].object for i in ring):
        return _FULL_PIPE  # the writer waits for a reader: the pipe is full
    if all(receive_edge(g.edges[i]) for i in ring):
        if (k := took_message(g, ring)) is not None:
            edge = g.edges[ring[k]]
            assert edge.to_pid is not None
            return _PARKED.format(client=who(g.procs[edge.pid]), server=who(g.procs[edge.to_pid]))
        return _LOST_MESSAGE  # message passing, not requests: nobody sends first
    if any(g.edges[i].how.startswith(OWED_HOW) for i in ring) and (
            k := own_call(g, ring)) is not None:
        return _REENTRANT.format(who=who(g.procs[g.edges[ring[k]].pid]))
    if set(kinds) <= {"tcp", "unix"} and all(sends(g.edges[i]) for i in ring):
        if (k := sends_unread(g, ring)) is not None:  # the stage that does not read, named
            return _FULL_SENDS.replace(_STAGE, f"{who(g.procs[g.edges[ring[k]].pid])}, "
                                       "whose loop sends all its work before it reads, closes")
        return _FULL_SENDS  # each waits for the next to take what it sends: full queues
    if set(kinds) <= {"tcp", "unix", "store"}:
        return _CALLBACK
    if any("accept queue" in g.edges[i].how for i in ring):
        return _UNACCEPTED
    if "queue" in kinds:
        return _FULL_QUEUES
    if "thread" in kinds and any(g.edges[i].object.startswith("the import lock of ")
                                 for i in ring):
        return _IMPORT_JOIN
    return next((a for k, a in _ADVICE.items() if set(k) <= set(kinds)),
                "one of them must act first: break the cycle")


def _paused(g: Graph, ring: list[int]) -> str | None:
    """The framework's words for a generator task paused until its caller consumes, where
    the ring goes through one (its caller waits for it instead)."""
    for i in ring:
        edge = g.edges[i]
        if edge.how.startswith(PAUSED_HOW):
            wait = paused_producer(g.procs[edge.pid].working_thread)
            if wait is not None:
                return wait.paused
    return None


_REENTRANT = ("{who}, while it does work for a request of the server, calls that same server: "
              "the server answers only once that work is done, and the work waits for the "
              "answer; never call back into a server from inside its own work (make the call "
              "before or after it, or to another server), and give the call a timeout")


_BOTH_WRITE = ("both pipes are full: each side writes the pipe the other reads, and reads only "
               "after its write: feed one pipe while reading the other (Popen.communicate("
               "input=...), or a thread that writes the child's stdin)")


_FULL_QUEUES = ("each waits for room in a bounded queue that the other drains only after its "
                "own puts: take the replies as you go (a get between puts, or a thread that "
                "drains them), or give one queue no bound")


_IMPORT_JOIN = ("a module's body waits for a thread that needs that same module, whose import "
                "lock the body's thread holds until the body ends (importlib detects only "
                "lock cycles, never a join): start the thread from a function called after the "
                "import, not at module level, or import what it needs before starting it")


_UNACCEPTED = ("the listener waits for the very process whose connection it has not "
               "accepted: accept and serve connections on their own thread, before anything "
               "that waits for a client")


_LOST_MESSAGE = ("each waits to receive a ZMQ message and none of them sends before it "
                 "receives: the message that should have started them was lost or never sent (a "
                 "PUB drops what it publishes before a SUB has joined, the 'slow joiner'; a "
                 "PUSH queued for a peer that is gone): synchronise before the first send (a "
                 "handshake, XPUB's subscription notice) or resend until answered")


_STAGE = "the stage that sends all its work before it reads what comes back closes"
_FULL_SENDS = ("each waits to send to the next, which takes nothing because it waits to send "
               "too: a ring of full queues (each hop bounded: zmq's high-water mark, the socket "
               f"buffers); {_STAGE} it: read while sending (a thread or task that drains the "
               "results as they come), or lift the bound (zmq.SNDHWM and zmq.RCVHWM 0, as "
               "SGLang's and vLLM's pipes set)")


_PARKED = ("{server} took the message {client} sent last (the kernel: it read all of it and "
           "has sent nothing since) and waits for another before it answers: the message was "
           "not lost, {server} holds it (a long poll nothing will answer, or an answer that "
           "waits for what {client} sends only after it): have {client} ask only once what "
           "the answer needs exists, or answer or refuse a request at once (and give the "
           "receive a timeout, zmq.RCVTIMEO)")


_CALLBACK = ("a server that calls a service which calls it back while it cannot accept or "
             "serve another request (one thread): serve requests on more threads "
             "(ThreadingHTTPServer, a worker pool), or do not call back into the caller")


# A process blocked writing its stdout or stderr, a pipe whose reader waits on something else.
CAPTURED = ("its reader captures that output but reads another pipe first: the pipe fills "
             "and the write blocks; read every captured pipe (Popen.communicate(), a thread "
             "per pipe) or send the output to a file")


def captured(g: Graph, ring: list[int]) -> bool:
    """A process blocked writing its stdout or stderr to a reader that is itself blocked
    reading another pipe of that same process (its stdout, while its stderr fills)."""
    for k, i in enumerate(ring):
        edge, nxt = g.edges[i], g.edges[ring[(k + 1) % len(ring)]]
        if edge.kind == "pipe" and edge.fd in (1, 2) and "(read end)" in edge.object \
                and nxt.kind == "pipe" and "(write end)" in nxt.object \
                and nxt.pid == edge.to_pid and nxt.to_pid == edge.pid:
            return True
    return False
