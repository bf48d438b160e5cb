"""The wait-for graph's leaked permits: threads wait in ``threading.Semaphore.acquire`` for a
permit that no live thread holds.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph). A semaphore used as a permit
(a concurrency limit, ``BoundedSemaphore(4)``) is taken and given back by the same function:
``with slots:``, ``acquire()`` then ``try/finally: release()``, or a ``release()`` further down
the same block (collect/source.py records that as ``Frame.releases``, and the lines between as
holding it). When threads wait to take such a permit and no thread of the process is inside a
region that holds it, no holder is left to give one back: every permit was taken on a path
that left before its ``release()`` (an exception, an early return), so the wait never ends. A
semaphore used as a signal (a bare ``acquire()`` that another thread's ``release()`` answers)
is no permit, and a holder that is still inside its region is the lock-holder chain's story.
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import blocked, user_frame
from hangscope.analyze.graph.waitwalk import Graph, hops_into, thread_names, waits_into
from hangscope.model import Frame, Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def _permit_wait(thread: Thread) -> Frame | None:
    """The caller's frame of a ``Semaphore.acquire`` (or ``with sem:``) that gives back what
    it takes: the frame just outside threading.py, taking a named permit."""
    python = [f for f in thread.frames if not f.native]
    for k, frame in enumerate(python):
        if not (frame.file or "").endswith("threading.py"):
            continue
        if frame.name.rsplit(".", 2)[-2:] not in (["Semaphore", "acquire"],
                                                   ["Semaphore", "__enter__"]):
            continue
        caller = next((f for f in python[k + 1:] if not (f.file or "").endswith(
            "threading.py")), None)
        if caller is not None and caller.takes and caller.releases:
            return caller
        return None
    return None


def _held(proc: Process, name: str) -> bool:
    return any(name in f.holds for t in proc.threads for f in t.frames if not f.native)


def leaked_permits(g: Graph) -> WaitPattern | None:
    """Threads wait for a permit of a semaphore that no thread of their process holds."""
    if not g.has_file("threading.py"):
        return None
    for proc in g.snap.processes:
        if proc.is_exited or not proc.threads:
            continue
        by_permit: dict[str, list[Thread]] = {}
        for thread in proc.threads:
            caller = _permit_wait(thread)
            if caller is not None and caller.takes and blocked(thread):
                by_permit.setdefault(caller.takes, []).append(thread)
        for permit, waiters in sorted(by_permit.items(), key=lambda kv: -len(kv[1])):
            if _held(proc, permit):
                continue  # a holder is still inside its region: it may give one back
            waiters.sort(key=lambda t: t.tid)
            inner = user_frame(waiters[0])
            site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
            verb = "waits" if len(waiters) == 1 else "wait"
            chain = (f"{thread_names(waiters)} of {who(proc)} {verb} in threading.Semaphore.acquire"
                     f"{site} for a permit of {permit}, and no thread holds one: every permit "
                     "was taken on a path that left before its release() (an exception or an "
                     "early return between acquire() and release()), so none will be given "
                     "back")
            others, into = waits_into(g, proc.pid)
            chain += hops_into(g, into)
            chain += (f"; take it with `with {permit}:` (or release it in a finally) so that "
                      "every path gives it back")
            return WaitPattern("leaked_permits", (proc.pid, *others), chain, tuple(into),
                               proc.pid, waiters[0].tid)
    return None
