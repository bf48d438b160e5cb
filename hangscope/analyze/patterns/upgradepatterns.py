"""A thread that takes a lock its own outer frame holds, through a lock of its own making.

A readers/writer lock built on a ``threading.Condition`` (``acquire_read`` /
``acquire_write``) blocks in ``Condition.wait``, not in a lock's acquire, so no lock edge
says who holds it. The source does: an outer frame of the blocked thread runs inside
``X.acquire_read() ... X.release_read()`` (it holds ``X``) while an inner one calls
``X.acquire_write()`` (it takes ``X``): an upgrade from read to write, which waits for every
reader to leave, itself included, for ever; a write-preferring lock then makes every new reader
wait behind it. The same holds for a plain non-reentrant lock taken twice down one stack.
"""

from __future__ import annotations

from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, thread_words
from hangscope.model import Frame
from hangscope.model.waits import WaitPattern


def _owner(frame: Frame) -> str:
    """Whose names a frame's lock text refers to: its class (``PrefixCache`` of
    ``PrefixCache.match``) or, for a function, its file: ``self.lock`` in two methods of one
    class is one object; in two classes it may be two."""
    head, _, _ = frame.name.rpartition(".")
    return f"{frame.file}:{head}" if head else frame.file or ""


@per_stack  # asked of every thread of every rank: once per distinct stack
def _takes_a_lock(frames: tuple[Frame, ...]) -> bool:
    return any(f.takes for f in frames if not f.native)


def lock_upgrade(g: Graph) -> WaitPattern | None:
    """A blocked thread whose frame takes ``X`` while an outer frame of its own holds ``X``,
    and the threads of its process that wait in that lock's code behind it."""
    for proc in g.having(_takes_a_lock):  # (a frame that takes a lock: none elsewhere)
        for thread in proc.threads:
            if proc.is_exited or not _takes_a_lock(thread.frames) or not blocked(thread):
                continue
            python = [f for f in thread.frames if not f.native]  # innermost first
            for k, taking in enumerate(python):
                if not taking.takes:
                    continue
                holder = next((f for f in python[k + 1:] if taking.takes in f.holds
                               and _owner(f) == _owner(taking)), None)
                if holder is None:
                    continue
                inner = python[k - 1] if k > 0 else None
                lock = taking.takes
                behind = [t for t in proc.threads if t.tid != thread.tid and blocked(t)
                          and inner is not None and any(
                              not f.native and f.file == inner.file for f in t.frames)]
                many = "s wait" if len(behind) > 1 else " waits"
                waits = (f"; {len(behind)} other thread{many} in that lock's code behind it ("
                         + ", ".join(t.name or str(t.tid) for t in behind[:4])
                         + (f" and {len(behind) - 4} more" if len(behind) > 4 else "") + ")"
                         if behind else "")
                via = f" through {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
                chain = (f"{thread_words(proc, thread)} waits to take {lock} at {taking.name} "
                         f"({taking.short_file}:{taking.line}){via}, while its own outer frame "
                         f"{holder.name} ({holder.short_file}:{holder.line}) holds {lock}: "
                         "it waits for itself to let go (a read lock upgraded to a write lock "
                         f"waits for every reader, itself included){waits}. Release the lock "
                         "before taking it again (or take the write lock from the start)")
                return WaitPattern("self_lock", (proc.pid,), chain, (), proc.pid, thread.tid)
    return None
