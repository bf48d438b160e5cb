"""Edges of a thread blocked on a terminal: the user's, or a pty whose master the job holds.

A write blocked on a pty slave whose master's holder is itself blocked reading (or polling)
that master is no full buffer, since its reader waits for bytes: the line discipline holds
the output back, as after an XOFF (^S) with IXON on (analyze/patterns/ttystop.py states it). The
master is matched to its slave by fdinfo's ``tty-index``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from hangscope.model import Process, Thread
from hangscope.model.waits import OUTPUT_STOPPED, FdRecord, WaitEdge

Calls = Mapping[int, tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]]]


def terminal_edges(fds: Mapping[int, Mapping[int, FdRecord]], calls: Calls,
                   tids: Mapping[int, Sequence[int]], reads: Collection[int], proc: Process,
                   thread: Thread, rec: FdRecord, how: str, what: str) -> Iterator[WaitEdge]:
    index = rec.target.removeprefix("/dev/pts/")
    masters = [(pid, r.fd) for pid, mine in fds.items() for r in mine.values()
               if r.target == "/dev/ptmx" and str(r.tty_index) == index and pid != proc.pid]
    obj = f"the terminal {rec.target}"
    if what == "read" or not masters:
        yield WaitEdge(proc.pid, thread.tid, "terminal", obj, how, outside=obj, fd=rec.fd)
        return
    blocked = [(pid, fd, calls[t]) for pid, fd in masters for t in tids.get(pid, ())
               if t in calls]
    reading = [pid for pid, fd, (nr, args, polled) in blocked
               if (nr in reads and args[:1] == (fd,)) or any(p == fd for p, _ in polled)]
    stopped = f" {OUTPUT_STOPPED}" if reading else ""
    how += (f"; its master (/dev/ptmx, tty-index {index}) is held by "
            + ", ".join(f"PID {pid}" for pid, _ in masters)
            + (", blocked reading it" if reading else ""))
    for pid in dict.fromkeys(pid for pid, _ in masters):
        yield WaitEdge(proc.pid, thread.tid, "terminal", obj + stopped, how, to_pid=pid,
                       fd=rec.fd)
