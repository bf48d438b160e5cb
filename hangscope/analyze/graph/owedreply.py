"""A wait for the reply to a request that the server read and has not answered.

Two event loops of the job, a client's and a server's, both idle in ``epoll_wait``, each
watching their connection for input: as far as the stacks go, each waits for the other. The
kernel says who spoke last. The server's end (on a port it listens on) holds nothing unread,
and data came to it after it last sent any (``tcp_info``: ``tcpi_last_data_recv`` below
``tcpi_last_data_sent``); the client's end sent after it last heard: the client made a request
and the server read it all. A request/response protocol owes the client the next message,
and the server, which did nothing in the window, is where it is held: a handler's coroutine
awaits something that never comes (Starlette#495: a middleware that drained the request body
and handed the app an empty ``receive``, which then waits for a body that never arrives).
The coroutine is on no thread's stack; the edge leads there.

Pure, over the fd index (analyze/graph/fdindex.py) and the syscall tables.
"""

from __future__ import annotations

from collections.abc import Iterator

from hangscope.analyze.evidence.progress import SLOW, STUCK
from hangscope.analyze.graph.fdindex import FdIndex
from hangscope.analyze.graph.unread import EPOLLIN
from hangscope.analyze.graph.zmqedges import io_thread
from hangscope.model import Process, Snapshot, Thread
from hangscope.model.waits import SYSCALLS, TcpConnection, WaitEdge, port_of

#: How such an edge's reason ends (analyze/graph/waitwalk.py words its hop by it).
OWES_REPLY = "it owes the reply"


def spoke_last(mine: TcpConnection, theirs: TcpConnection) -> bool:
    """``mine`` sent after it last heard, and ``theirs`` read all of it and sent nothing since
    it came: the next message is ``theirs`` to send."""
    facts = (mine.last_sent_ms, mine.last_recv_ms, theirs.last_sent_ms, theirs.last_recv_ms)
    if None in facts or theirs.unread != 0:
        return False
    sent, heard, their_sent, their_heard = facts  # type: ignore[misc]
    return sent < heard and their_heard < their_sent


def _idle(snap: Snapshot, still: frozenset[int], pid: int) -> bool:
    """``pid`` did nothing in the window (``still``: unread.quiet), or nothing the window
    could call progress: its own timed polls (uvicorn's loop ticks every 0.1 s), a wake-up or
    two a loaded machine adds (stuck, or slow at most)."""
    return pid in still or any(r.pid == pid and r.decision in (STUCK, SLOW)
                               for r in (snap.progress.ranks if snap.progress else ()))


def owed_reply_edges(idx: FdIndex, snap: Snapshot, proc: Process, thread: Thread,
                     still: frozenset[int]) -> Iterator[WaitEdge]:
    """``thread``'s edges to the servers that owe its event loop a reply: a TCP connection its
    epoll watches for input, to a port the server listens on, where the client spoke last,
    the server read it all, and both did nothing in the window (:func:`_idle`). Not a zmq
    I/O thread's epoll: a zmq connection carries messages, not requests and replies (the
    engine that said READY last is owed nothing), and the threads waiting on it have the
    zmq receive's own edges."""
    table = SYSCALLS.get(idx.arch)
    call = idx.calls.get(thread.tid)
    if table is None or call is None or call[0] not in table["epoll_ms"] or (
            thread.state != "S") or not idx.watched.get(thread.tid) or io_thread(thread):
        return
    if not _idle(snap, still, proc.pid):
        return
    for fd, events in idx.watched.get(thread.tid, ()):
        rec = idx.fds.get(proc.pid, {}).get(fd)
        mine = idx.conns.get(rec.inode) if rec is not None and rec.inode is not None else None
        if not events & EPOLLIN or mine is None:
            continue
        other = idx.tcp_by_ends.get((mine.remote, mine.local))
        theirs = idx.conns.get(other) if other is not None else None
        if theirs is None or not spoke_last(mine, theirs):
            continue
        port = port_of(theirs.local)
        servers = {pid for _, pid in idx.listeners.get(port, [])} if port is not None else set()
        for pid in idx.holders_of(theirs.inode):
            if pid == proc.pid or pid not in servers or not _idle(snap, still, pid):
                continue
            age = (theirs.last_recv_ms or 0) / 1000
            yield WaitEdge(
                proc.pid, thread.tid, "tcp", f"TCP {mine.local} -> {mine.remote}",
                f"reading fd {fd}: its event loop watches it for the reply to the request it "
                f"sent last; PID {pid}, which listens on port {port}, read all of it "
                f"{age:.1f} s ago (nothing unread) and has sent nothing since: {OWES_REPLY}",
                to_pid=pid, fd=fd)
