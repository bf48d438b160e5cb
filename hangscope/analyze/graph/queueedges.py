"""A put into a full ``multiprocessing.Queue`` waits for the processes that read it.

``Queue.put`` on a full bounded queue blocks on the queue's semaphore, a futex in shared
memory that no fd names: the kernel says only "futex". The queue is a pipe its creator made
before it forked the others, so every process that uses it holds both of its ends; the one
that will take an item (and give the semaphore back) reads that pipe. The edge goes from the
blocked put to every other process of the job holding the read end of a pipe the putter holds
both ends of: a worker's full output queue waits for the trainer that drains it (asleep
between phases: paused), a rank's full shard queue for its writer child (which may wait back
on a full queue of its own: a cycle).

A queue's feeder thread (``Queue._feed``) writes the pipe under the queue's write lock, a
``SemLock`` in shared memory that no fd names either: a feeder waiting at ``wacquire()`` (its
innermost Python frame is ``_feed`` itself) waits for the feeder of another process that is
inside its write (``_feed`` calling ``send_bytes``) of a queue pipe both hold both ends of
(``queue_lock_edges``). A process whose every Python thread feeds a queue, or waits at exit for
those that do, reads nothing and never will (``feeds_only``): holding the read end, as every
process given the queue does, makes it no reader.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

from hangscope.model import Category, Process, Thread
from hangscope.model.waits import FdRecord, WaitEdge

_BLOCKED = frozenset({Category.LOCK, Category.IPC_WAIT})


def _in_queue_call(thread: Thread, method: str) -> bool:
    return any(not f.native and (f.file or "").endswith("multiprocessing/queues.py")
               and f.name.rsplit(".", 1)[-1] == method for f in thread.frames)


def _in_queue_put(thread: Thread) -> bool:
    return _in_queue_call(thread, "put")


def in_queue_get(thread: Thread) -> bool:
    """The thread is inside a multiprocessing queue's ``get``."""
    return _in_queue_call(thread, "get")


def _feed_frame(thread: Thread) -> int | None:
    """The index in ``thread.frames`` of a multiprocessing queue's feeder loop, if any."""
    return next((k for k, f in enumerate(thread.frames) if not f.native
                 and (f.file or "").endswith("multiprocessing/queues.py")
                 and f.name.rsplit(".", 1)[-1] == "_feed"), None)


def feeds(thread: Thread | None) -> bool:
    """The thread is a multiprocessing queue's feeder (``Queue._feed``): it writes a queue."""
    return thread is not None and _feed_frame(thread) is not None


def _at_write_lock(thread: Thread) -> bool:
    """A feeder blocked at its queue's write lock: ``_feed`` is its innermost Python frame
    (``wacquire()`` is a C method; under it only native frames, the SemLock's futex)."""
    k = _feed_frame(thread)
    return k is not None and all(f.native for f in thread.frames[:k])


def holds_items(thread: Thread) -> bool:
    """A feeder that took items off its buffer and has not written them: inside ``_feed`` but
    not at its idle wait for the next put (``notempty.wait()``, ``Condition.wait`` called from
    ``_feed``): pickling one (which may import a module), at the write lock, or writing."""
    k = _feed_frame(thread)
    if k is None:
        return False
    callee = next((f for f in reversed(thread.frames[:k]) if not f.native), None)
    return callee is None or not (callee.name.rsplit(".", 1)[-1] == "wait"
                                  and (callee.file or "").endswith("threading.py"))


def to_feeder(edges: list[WaitEdge], procs: Mapping[int, Process]) -> list[WaitEdge]:
    """A read of a pipe whose writer is another process leads to that process's one queue
    feeder holding items it has not written, not to its working thread: a
    multiprocessing.Queue's data goes through its feeder thread (a ProcessPoolExecutor's call
    queue, whose feeder waits for the import lock of the module its main thread imports)."""
    routed = []
    for e in edges:
        proc = procs.get(e.to_pid) if e.to_pid is not None else None
        if e.kind == "pipe" and e.to_tid is None and proc is not None and e.to_pid != e.pid \
                and "(write end)" in e.object:
            held = [t for t in proc.threads if holds_items(t)]
            if len(held) == 1:
                feeder = held[0]
                e = replace(e, to_tid=feeder.tid, probable=True, how=(
                    f"{e.how}; thread {feeder.name or feeder.tid} feeds a multiprocessing "
                    "queue and holds items it has not written: the data comes through it"))
        routed.append(e)
    return routed


def _in_write(thread: Thread) -> bool:
    """A feeder inside its write, so holding the queue's write lock: ``_feed`` calls
    ``send_bytes`` (multiprocessing/connection.py) and the write has not returned."""
    k = _feed_frame(thread)
    return k is not None and any(not f.native and (f.file or "").endswith(
        "multiprocessing/connection.py") for f in thread.frames[:k])


def _exiting(thread: Thread) -> bool:
    """A main thread past its code, joining at exit (multiprocessing's ``_exit_function``,
    ``threading._shutdown``): it will run nothing of the program again."""
    return any(not f.native and ((f.name == "_exit_function" and (f.file or "").endswith(
        "multiprocessing/util.py")) or (f.name == "_shutdown" and (f.file or "").endswith(
            "threading.py"))) for f in thread.frames)


def feeds_only(proc: Process) -> bool:
    """Every Python thread of ``proc`` is a queue's feeder or joins at exit, and one feeds:
    it only writes its queues, and holds their read ends only because whoever is given a
    multiprocessing.Queue holds both ends of its pipe; it is no reader."""
    threads = [t for t in proc.threads if t.python and t.frames]
    feeders = [t for t in threads if _feed_frame(t) is not None]
    return bool(feeders) and all(_feed_frame(t) is not None or _exiting(t) for t in threads)


def no_reader(edge: WaitEdge, procs: Mapping[int, Process]) -> bool:
    """``edge`` is a write to a pipe, and the holder of its read end it leads to only feeds
    queues or exits (``feeds_only``): it holds that end because every process given a
    multiprocessing.Queue holds both, and will not read it."""
    holder = procs.get(edge.to_pid) if edge.to_pid is not None else None
    return (edge.kind in ("pipe", "fifo") and "(read end)" in edge.object
            and holder is not None and feeds_only(holder))


def queue_lock_edges(proc: Process, thread: Thread,
                     fds: Mapping[int, Mapping[int, FdRecord]],
                     procs: Mapping[int, Process]) -> Iterator[WaitEdge]:
    """A feeder waiting for its queue's write lock -> the feeders of other processes inside a
    write of a queue pipe both processes hold both ends of (the lock's holder: probable, as
    the lock names no owner)."""
    if thread.category not in _BLOCKED or not _at_write_lock(thread):
        return
    queues = {inode for inode, ends in _pipe_ends(fds.get(proc.pid, {})).items()
              if ends >= {"r", "w"}}
    for pid, records in fds.items():
        other = procs.get(pid)
        if pid == proc.pid or other is None or other.is_exited:
            continue
        shared = sorted(inode for inode, ends in _pipe_ends(records).items()
                        if inode in queues and ends >= {"r", "w"})
        for holder in (t for t in other.threads if _in_write(t)) if shared else ():
            yield WaitEdge(proc.pid, thread.tid, "queue_lock", f"the write lock of the "
                           f"multiprocessing.Queue on pipe {shared[0]}", "Queue._feed waits at "
                           "wacquire() (a SemLock in shared memory); the holder: a feeder of "
                           "another process of that queue inside its write", pid, holder.tid,
                           probable=True)


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
