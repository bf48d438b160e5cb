"""A wait to send on a socket whose reader stopped reading it.

An event loop that watches a connection for room (``EPOLLOUT`` in its epoll set: the kernel's
send buffer to the peer is full) waits for the process at the other end to read. Where that
process neither watches the socket for input nor blocks reading it, and none of its threads
runs, nothing will: asyncio takes a connection out of its epoll set when the protocol has not
consumed what came (``pause_reading``: an aiohttp response whose body nobody reads, a
StreamReader over its limit). What the reader awaits instead of reading is inside its own
process (aiohttp#1623: ``gather`` of more gets than the connector's limit, the first
responses' unread bodies holding every connection while the others wait for one), so the
writer's wait leads there.

Pure, over the fd index (analyze/graph/fdindex.py) and the syscall tables.
"""

from __future__ import annotations

from collections.abc import Iterator

from hangscope.analyze.evidence.progress import MIN_WAKES, WAKES_PER_PAUSE
from hangscope.analyze.graph.fdindex import FdIndex
from hangscope.model import Process, Snapshot, Thread
from hangscope.model.waits import SYSCALLS, WaitEdge

#: epoll's (and poll's) event bits: input, room to write.
EPOLLIN, EPOLLOUT = 1, 4
#: How such an edge's reason ends (analyze/graph/waitwalk.py words its hop by it).
STOPPED_READING = "its loop stopped reading that connection"


#: Off CPU this long, every thread of it, where no window measured it: it read nothing lately.
QUIET_S = 1.0


def quiet(snap: Snapshot) -> frozenset[int]:
    """The processes that did nothing in the window: no thread woke up more than py-spy's
    pauses made it (a reader whose loop still wakes, a download throttled chunk by chunk,
    reads between its timers: the sample cannot prove it stopped); with no window, those
    whose every thread has been off CPU for :data:`QUIET_S` or longer."""
    measured = {p.pid: p for r in snap.readings if r.progress is not None
                for p in r.progress.processes}
    out = set()
    for proc in snap.processes:
        seen = measured.get(proc.pid)
        if seen is not None and seen.threads:
            wakes = sum((t.counters.voluntary or 0) for t in seen.threads
                        if t.counters is not None)
            if wakes - WAKES_PER_PAUSE * seen.pauses * len(seen.threads) < MIN_WAKES:
                out.add(proc.pid)
        elif proc.threads and all((t.off_cpu_s or 0.0) >= QUIET_S for t in proc.threads):
            out.add(proc.pid)
    return frozenset(out)


def _peer_socket(idx: FdIndex, inode: int) -> tuple[int, str] | None:
    """The other end of a connected socket of the job, and how the edge names the pair."""
    peer = idx.unix_peer.get(inode)
    if peer is not None:
        return peer, f"Unix socket {inode} (peer {peer})"
    ends = idx.tcp.get(inode)
    if ends is None or ends[0] == ends[1]:
        return None
    other = idx.tcp_by_ends.get((ends[1], ends[0]))
    return (other, f"TCP {ends[0]} -> {ends[1]}") if other is not None else None


def _reads(idx: FdIndex, pid: int, inode: int) -> bool:
    """Some thread of ``pid`` may read its socket ``inode``: it runs, it watches the socket's
    fd for input (epoll, poll) or blocks reading it; or what it does is not known."""
    proc = idx.procs.get(pid)
    fds = {fd for fd, rec in idx.fds.get(pid, {}).items() if rec.inode == inode}
    table = SYSCALLS.get(idx.arch)
    if proc is None or not fds or table is None or any(
            t.state not in ("S", "D") for t in proc.threads):
        return True
    for tid in idx.tids.get(pid, []):
        nr, args, polled = idx.calls[tid]
        if any(fd in fds and events & EPOLLIN for fd, events in (*polled,
                                                                  *idx.watched.get(tid, ()))):
            return True
        if nr in table["read"] and args and args[0] in fds:
            return True
    return False


def unread_edges(idx: FdIndex, proc: Process, thread: Thread,
                 still: frozenset[int]) -> Iterator[WaitEdge]:
    """``thread``'s edges to the readers of the sockets its event loop waits to send on,
    where that reader stopped reading them and did nothing in the window (``still``:
    :func:`quiet`)."""
    table = SYSCALLS.get(idx.arch)
    call = idx.calls.get(thread.tid)
    if table is None or call is None or call[0] not in table["epoll_ms"] or (
            thread.state != "S"):
        return
    for fd, events in idx.watched.get(thread.tid, ()):
        rec = idx.fds.get(proc.pid, {}).get(fd)
        if not events & EPOLLOUT or rec is None or rec.inode is None or (
                not rec.target.startswith("socket:")):
            continue
        found = _peer_socket(idx, rec.inode)
        if found is None:
            continue
        peer, obj = found
        for pid in idx.holders_of(peer):
            if pid == proc.pid or pid not in still or _reads(idx, pid, peer):
                continue
            yield WaitEdge(
                proc.pid, thread.tid, "unix" if obj.startswith("Unix") else "tcp", obj,
                f"sending on fd {fd}: its event loop waits for room (EPOLLOUT in its epoll set: "
                f"the kernel's send buffer to the peer is full), and PID {pid}, which holds "
                f"the other end, neither watches nor reads it: {STOPPED_READING}, and what "
                "was sent sits unread", to_pid=pid, fd=fd)
