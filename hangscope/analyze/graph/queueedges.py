"""A put into a full ``multiprocessing.Queue`` waits for the processes that read it.

``Queue.put`` on a full bounded queue blocks on the queue's semaphore, a futex in shared
memory that no fd names: the kernel says only "futex". The queue is a pipe its creator made
before it forked the others, so every process that uses it holds both of its ends; the one
that will take an item (and give the semaphore back) reads that pipe. The edge goes from the
blocked put to every other process of the job holding the read end of a pipe the putter holds
both ends of: a worker's full output queue waits for the trainer that drains it (asleep
between phases: paused), a rank's full shard queue for its writer child (which may wait back
on a full queue of its own: a cycle).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from hangscope.model import Category, Process, Thread
from hangscope.model.waits import FdRecord, WaitEdge

_BLOCKED = frozenset({Category.LOCK, Category.IPC_WAIT})


def _in_queue_put(thread: Thread) -> bool:
    return any(not f.native and (f.file or "").endswith("multiprocessing/queues.py")
               and f.name.rsplit(".", 1)[-1] == "put" for f in thread.frames)


def _pipe_ends(records: Mapping[int, FdRecord]) -> dict[int, set[str]]:
    """Pipe inode -> the ends (``r``, ``w``) these fds hold."""
    out: dict[int, set[str]] = {}
    for rec in records.values():
        if rec.target.startswith("pipe:") and rec.inode is not None and rec.access:
            out.setdefault(rec.inode, set()).update(rec.access)
    return out


def queue_put_edges(proc: Process, thread: Thread,
                    fds: Mapping[int, Mapping[int, FdRecord]],
                    procs: Mapping[int, Process]) -> Iterator[WaitEdge]:
    """The waits of ``thread`` blocked putting into a full multiprocessing queue. A reader
    that itself waits to put (a sibling producer of the same queue, which inherited its
    pipe) is a partner only where no other reader is: then it must be the consumer, held up
    by a full queue of its own."""
    if thread.category not in _BLOCKED or not _in_queue_put(thread):
        return
    mine = _pipe_ends(fds.get(proc.pid, {}))
    queues = {inode for inode, ends in mine.items() if ends >= {"r", "w"}}
    if not queues:
        return
    readers: list[tuple[int, int, bool]] = []
    for pid, records in fds.items():
        if pid == proc.pid:
            continue
        theirs = _pipe_ends(records)
        read = sorted(inode for inode in queues if "r" in theirs.get(inode, ()))
        other = procs.get(pid)
        if read and other is not None and not other.is_exited:
            readers.append((pid, read[0], any(_in_queue_put(t) for t in other.threads)))
    if any(not putting for _, _, putting in readers):
        readers = [r for r in readers if not r[2]]
    for pid, inode, _ in readers:
        yield WaitEdge(proc.pid, thread.tid, "queue", f"pipe {inode} (a full "
                       "multiprocessing.Queue)", "Queue.put blocked on the full queue's "
                       "semaphore; the queue's pipe (both ends held) is read there", pid, None)
