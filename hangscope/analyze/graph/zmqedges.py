"""A thread waiting in a ZeroMQ receive waits for the peers of its process's zmq connections.

libzmq moves bytes on its own I/O threads (``ZMQbg/IO/N``): they hold the TCP and IPC
connections in their epoll set, and hand each message to the application's socket through a
mailbox, an eventfd. A thread in ``socket.recv``/``recv_multipart`` or ``zmq.Poller.poll``
(vLLM's engine core and its input thread, SGLang's scheduler and detokenizer) is therefore
blocked polling that eventfd, which no /proc fact connects to anyone. What it waits for comes
over the connections the process's I/O threads watch: an edge to each process holding the
other end, as a read of that connection (how the I/O thread sees it).

The mailbox does not say which zmq socket a connection belongs to; a process whose I/O
threads watch several connections waits, as far as the kernel shows, on any of them.

A thread in ``Context.term()`` (``zmq_ctx_term``) waits until every socket of the context is
closed and, under the default ``LINGER`` of -1, its unsent messages are taken: it waits on the
peers of the connections its I/O threads still hold, and where they hold none, on a peer that
is gone (the messages wait for it forever: pyzmq #102).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence

from hangscope.analyze.evidence.stackmemo import Frames, per_stack
from hangscope.analyze.graph.listeners import asks
from hangscope.analyze.graph.loopedges import idle_loop
from hangscope.frameworks import in_zmq_wait
from hangscope.model import Process, Thread
from hangscope.model.waits import FdRecord, KernelWaits, TaskSyscall, WaitEdge

_ZMQ_PY = re.compile(r"(?:^|/)zmq/(?:sugar/(?:socket|poll)\.py|green/|asyncio)")
_ZMQ_NATIVE = re.compile(r"zmq_(?:poll|msg_recv|recv)|zmq::(?:socket_base_t::recv|"
                         r"signaler_t::wait|mailbox_t::recv)")
_ZMQ_SEND_NATIVE = re.compile(r"zmq_(?:msg_)?send|zmq::socket_base_t::send")
_ZMQ_SEND_PY = re.compile(r"\.send(?:_\w+)?$")
_ZMQ_ASYNC_PY = re.compile(r"(?:^|/)zmq/_future\.py$")
_POLLS = frozenset({"poll", "__poll", "ppoll", "__ppoll"})
_IO_THREAD = re.compile(r"^ZMQbg/IO/\d+$")
_TERM_PY = re.compile(r"(?:^|/)zmq/sugar/context\.py$")
_TERM_NATIVE = re.compile(r"zmq_ctx_(?:term|destroy|shutdown)|zmq::ctx_t::terminate")

def io_thread(thread: Thread) -> bool:
    """The thread is one of a zmq context's I/O threads (``ZMQbg/IO/N``), which hold its
    connections in their epoll set: its wait is the context's, not a request of its own."""
    return bool(_IO_THREAD.match(thread.name or ""))


#: Edges of a read of one socket fd: (process, thread, fd record, how) -> edges.
SocketEdges = Callable[[Process, Thread, FdRecord, str], Iterator[WaitEdge]]


def zmq_call(thread: Thread) -> str | None:
    """The thread's innermost zmq call: ``"receive"`` (pyzmq or libzmq waiting for a message,
    or a framework's own wait that polls a zmq socket between spins: hangscope/frameworks
    ``zmq_waits``), ``"send"``, ``"async"`` (a ``zmq.asyncio`` or future socket, which tries
    with NOBLOCK and leaves the waiting to its loop's select), or None."""
    return _zmq_call(thread.frames)


@per_stack  # asked of every rank's working thread (131,072 of them): once per stack
def _zmq_call(frames: Frames) -> str | None:
    for f in frames[:10]:
        if f.native:
            if _ZMQ_SEND_NATIVE.search(f.name):
                return "send"
            if _ZMQ_NATIVE.search(f.name):
                return "receive"
        elif _ZMQ_ASYNC_PY.search(f.file or ""):
            return "async"
        elif _ZMQ_PY.search(f.file or ""):
            return "send" if _ZMQ_SEND_PY.search(f.name) else "receive"
        elif in_zmq_wait(f.file):
            return "receive"
    return None


#: How a zmq receive's edges begin (``WaitEdge.how``): one per connection of its process.
RECEIVE_HOW = "a zmq receive"


def receive_edge(edge: WaitEdge) -> bool:
    """The edge is a zmq receive's: it waits on any of its process's connections, not this
    one alone."""
    return edge.how.startswith(RECEIVE_HOW)


def zmq_receive_stack(frames: Frames) -> bool:
    """The stack waits in a zmq receive (``in_zmq_receive``): a fact for ``Graph.having``."""
    return _zmq_call(frames) == "receive"


def zmq_wait_stack(frames: Frames) -> bool:
    """The stack waits in a zmq receive or send (not an asyncio socket's): for ``having``."""
    return _zmq_call(frames) in ("receive", "send")


def in_zmq_receive(thread: Thread) -> bool:
    """The thread waits for a zmq message. Not a thread whose innermost zmq call is a send:
    it hands its message to the I/O thread's queue and returns (an asyncio loop caught in
    ``send_pyobj`` writing zmq's mailbox is between two turns, not waiting for anyone)."""
    return zmq_call(thread) == "receive"


def in_zmq_send_blocked(thread: Thread) -> bool:
    """The thread is blocked in a zmq send: libzmq polls its mailbox inside ``zmq_msg_send``
    until the pipe to a peer has room (a PUSH or DEALER with no peer connected, or one whose
    peer stopped reading and let the queue reach its high-water mark)."""
    return zmq_call(thread) == "send" and bool(thread.frames) and thread.frames[0].native \
        and thread.frames[0].name in _POLLS


def in_zmq_term(thread: Thread) -> bool:
    """The thread waits in ``Context.term()``/``destroy()``: for its sockets' unsent
    messages to be taken (LINGER)."""
    return _in_term(thread.frames)


@per_stack
def _in_term(frames: Frames) -> bool:
    return any((not f.native and _TERM_PY.search(f.file or "") and f.name.rsplit(".", 1)[-1]
                in ("term", "destroy")) or (f.native and _TERM_NATIVE.search(f.name))
               for f in frames[:12])


def zmq_edges(kernel: KernelWaits, fds: Mapping[int, FdRecord], connected: frozenset[int],
              proc: Process, thread: Thread, socket_edges: SocketEdges,
              unsent: Mapping[int, int]) -> Iterator[WaitEdge]:
    """The edges of ``thread``, blocked in a zmq receive: one per connection its process's
    zmq I/O threads watch (``connected``: the inodes of sockets with a peer); blocked in a
    send or ``term()``, to the peers of the connections holding bytes it sent that they have
    not read (``unsent``: socket inode -> those bytes, FdIndex.unsent)."""
    mine = kernel.process(proc.pid)
    if mine is None or thread.state != "S":
        return
    if in_zmq_term(thread):
        yield from _handover_edges(kernel, fds, connected, proc, thread, socket_edges, _TERM,
                                   unsent)
        return
    if in_zmq_send_blocked(thread):
        yield from _handover_edges(kernel, fds, connected, proc, thread, socket_edges, _SEND,
                                   unsent)
        return
    if not in_zmq_receive(thread):
        return
    names = {t.tid: t.name for t in proc.threads}
    for call, fd, rec in _io_connections(kernel, fds, connected, proc, readable=True):
        how = (f"{RECEIVE_HOW}: its messages come through zmq's I/O thread "
               f"{names[call.tid]} ({call.tid}), whose epoll watches fd {fd}")
        yield from socket_edges(proc, thread, rec, how)


#: How an idle event loop's edges to its zmq peers begin: it owes a reply (owed_loop_edges).
OWED_HOW = f"{RECEIVE_HOW} of its idle event loop"


def owed_loop_edges(kernel: KernelWaits, fds: Mapping[int, Mapping[int, FdRecord]],
                    connected: frozenset[int], procs: Sequence[Process],
                    edges: Sequence[WaitEdge], socket_edges: SocketEdges) -> Iterator[WaitEdge]:
    """A server whose event loop idles (every coroutine awaits) while a process of the job
    waits for its reply to a request (a read of a TCP connection to a port it listens on; a
    zmq receive is a message, no request) handed that request on: the request's coroutine
    awaits what comes back over the zmq connections its I/O threads hold (a front end and its
    engine: vLLM's API server and its EngineCore, SGLang's tokenizer manager and its
    scheduler). An edge from the loop's thread to the peer of each, as a zmq receive's (any of
    them may owe it); none where the loop's thread has edges of its own (``edges``: the
    others, built first)."""
    into: dict[int, list[WaitEdge]] = {}
    waiting: set[tuple[int, int | None]] = set()
    for e in edges:
        waiting.add((e.pid, e.tid))
        if e.to_pid is not None and e.to_pid != e.pid and not receive_edge(e):
            into.setdefault(e.to_pid, []).append(e)
    for proc in procs:
        asked = [e for e in into.get(proc.pid, ()) if asks(e, proc)]
        loop = next((t for t in proc.threads if idle_loop(t)), None) if asked else None
        if loop is None or proc.is_exited or (proc.pid, loop.tid) in waiting:
            continue
        names = {t.tid: t.name for t in proc.threads}
        for call, fd, rec in _io_connections(kernel, fds.get(proc.pid, {}), connected, proc,
                                             readable=True):
            how = (f"{OWED_HOW}, which owes PID {asked[0].pid} a "
                   "reply: the request's coroutine awaits what its zmq peers send back; zmq's "
                   f"I/O thread {names[call.tid]} ({call.tid}) watches fd {fd}")
            yield from socket_edges(proc, loop, rec, how)


#: How a zmq send's edge to the peer that does not take its messages begins.
SEND_HOW = "a zmq send blocked until a peer takes its message"

#: A wait for a peer to take queued messages: (edge kind, object, why, what stands outside when
#: no I/O thread holds a connection, the wording of an edge to a held one).
_Handover = tuple[str, str, str, str, Callable[[int, int], str]]

_SEND: _Handover = (
    "zmq_send", "its zmq send",
    "zmq_msg_send polls its mailbox until a pipe to a peer has room; none of the process's "
    "zmq I/O threads holds a connection",
    "no peer: nothing is connected to the socket to take the message (its peer never "
    "connected, or is gone); a send with zmq.SNDTIMEO or NOBLOCK would fail instead of waiting",
    lambda tid, fd: (f"{SEND_HOW} (the queue to it at its high-water mark): zmq's I/O "
                     f"thread {tid} holds this connection, fd {fd}"))

_TERM: _Handover = (
    "zmq_term", "zmq Context.term() (its sockets' unsent messages)",
    "term() returns once every socket is closed and, with LINGER -1 (the default), its queued "
    "messages delivered; none of its zmq I/O threads holds a connection to deliver them on",
    "a peer that is gone (its queued messages wait for it forever; close the sockets with "
    "linger=0, or set zmq.LINGER, before term())",
    lambda tid, _fd: ("zmq term() waits until its sockets' unsent messages are taken "
                      f"(LINGER); zmq's I/O thread {tid} still holds this connection"))


def _handover_edges(kernel: KernelWaits, fds: Mapping[int, FdRecord], connected: frozenset[int],
                    proc: Process, thread: Thread, socket_edges: SocketEdges,
                    handover: _Handover, unsent: Mapping[int, int]) -> Iterator[WaitEdge]:
    """A blocked send's or ``term()``'s edges: to the peers of the connections its I/O threads
    hold (a peer that stopped taking messages: the queue to it at its high-water mark), or,
    with none, to nobody in the job (no peer connected, or gone)."""
    kind, obj, why, outside, how = handover
    held = list(_io_connections(kernel, fds, connected, proc))
    # The kernel says which connections its messages wait on: those holding bytes it sent that
    # the peer has not read. A send at its high-water mark in a process whose I/O threads also
    # hold the connections it reads from (a pipeline stage) waits on those peers only.
    backed = [c for c in held if unsent.get(c[2].inode)]
    for call, fd, rec in backed or held:
        yield from socket_edges(proc, thread, rec, how(call.tid, fd))
    if not held:
        yield WaitEdge(proc.pid, thread.tid, kind, obj, why, outside=outside)


def _io_connections(kernel: KernelWaits, fds: Mapping[int, FdRecord], connected: frozenset[int],
                    proc: Process, readable: bool = False
                    ) -> Iterator[tuple[TaskSyscall, int, FdRecord]]:
    """The connected sockets the process's zmq I/O threads watch (``readable``: for input,
    EPOLLIN): (their epoll_wait, fd, record), each fd once."""
    mine = kernel.process(proc.pid)
    io_tids = {t.tid for t in proc.threads if io_thread(t)}
    seen: set[int] = set()
    for call in (mine.syscalls if mine is not None else ()):
        if call.tid not in io_tids:
            continue
        for fd, events in call.watched:
            rec = fds.get(fd)
            if rec is None or fd in seen or (readable and not events & 1) \
                    or rec.inode not in connected or not rec.target.startswith("socket:"):
                continue
            seen.add(fd)
            yield call, fd, rec
