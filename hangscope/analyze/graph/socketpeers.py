"""Who of a socket's peer process the waiter waits on: the thread blocked on that very
socket (the connection's handler, not the main thread idle in accept), or, when we wait for a
reply and that thread only waits at the head of its loop for our next message, the peer's
other threads (one of them, a request handler, sends the reply).

Pure, over analyze/graph/fd index (analyze/graph/fdindex.py) and syscall tables.
"""

from __future__ import annotations

from collections.abc import Iterator

from hangscope.analyze.graph.fdindex import FdIndex
from hangscope.analyze.graph.threadedges import at_loop_head, joins
from hangscope.model import Process, Thread
from hangscope.model.waits import WaitEdge

Table = dict[str, set[int]]


def socket_threads(idx: FdIndex, table: Table | None, pid: int, inode: int) -> list[int]:
    """The threads of ``pid`` blocked on its fd of socket ``inode`` alone: a read, write or
    recv of that fd, or a poll of that one fd (a socket with a timeout). A thread polling many
    fds (a selector, a store's daemon) serves whichever speaks first: the process, not that
    thread, is what the peer waits on."""
    if table is None:
        return []
    fds = {fd for fd, rec in idx.fds.get(pid, {}).items()
           if rec.inode == inode and rec.target.startswith("socket:")}
    found = []
    for tid in idx.tids.get(pid, []):
        nr, args, polled = idx.calls[tid]
        if nr in table["poll"] or polled:
            if len(polled) == 1 and polled[0][0] in fds:
                found.append(tid)
        elif (nr in table["read"] or nr in table["write"]) and args and args[0] in fds:
            found.append(tid)
    return found


def peer_edges(idx: FdIndex, table: Table | None, proc: Process, thread: Thread, kind: str,
               obj: str, how: str, pid: int, peer: int, fd: int) -> Iterator[WaitEdge]:
    """The edge to the holder ``pid`` of the peer socket ``peer``: to each of its threads
    blocked on that very socket (the connection's handler thread, not the main thread idle in
    accept), or to the process where none is."""
    tids = [t for t in socket_threads(idx, table, pid, peer) if (pid, t) != (proc.pid, thread.tid)]
    senders = _senders(idx, table, pid, tids) if tids and not how.startswith(("write", "send")) \
        and not at_loop_head(thread) else []
    if senders:
        # We wait for a reply, and the peer's reader thread waits at the head of its loop for
        # our next message: one of its other threads (a request handler) sends our reply.
        for tid in senders:
            yield WaitEdge(proc.pid, thread.tid, kind, obj,
                           f"{how}; the peer's reader waits for the next request, so one of "
                           f"PID {pid}'s other threads sends the reply", to_pid=pid,
                           to_tid=tid, fd=fd, probable=True)
        return
    if not tids:
        yield WaitEdge(proc.pid, thread.tid, kind, obj, how, to_pid=pid, fd=fd)
    for tid in tids:
        yield WaitEdge(proc.pid, thread.tid, kind, obj,
                       f"{how}; thread {tid} of PID {pid} is blocked on that peer socket",
                       to_pid=pid, to_tid=tid, fd=fd)


def _senders(idx: FdIndex, table: Table | None, pid: int, tids: list[int]) -> list[int]:
    """The other Python threads of ``pid`` when every one of ``tids`` reads its socket at the
    head of its loop (waits for the next request); none where that is not so (a
    single-threaded peer reading too, or a reader inside a request: a real framing
    deadlock)."""
    proc = idx.procs.get(pid)
    if table is None or proc is None:
        return []
    threads = {t.tid: t for t in proc.threads}
    reading = all((call := idx.calls.get(t)) is not None and (
        call[0] in table["read"] or any(events & 1 for _, events in call[2]))
        and at_loop_head(threads.get(t)) for t in tids)
    # A thread joining another sends nothing until that one ends: not who replies.
    others = [t.tid for t in proc.threads if t.python and t.frames and t.tid not in tids
              and not t.helper and not joins(t)]
    return others if reading else []
