"""The wait-for graph's lost wake-ups: every thread of a process waits for another thread of
it to notify it, and none runs to.

Pure, over a classified Snapshot (analyze/waitwalk.py's Graph). A thread in ``Event.wait``,
``Condition.wait``, ``Queue.get`` or ``Future.result`` waits for a thread of its own process to
set, notify, put or complete it. When every thread of the process is in such a wait, none
blocked in I/O, a sleep or a child, and at least one calls ``Condition.wait``/``Event.wait``
itself (not an executor's worker idling on its task queue), no thread is left to wake the
others: a notify sent before they waited (``notify_all()`` before ``wait()``), or a wait
without a predicate. A daemon that idles on purpose waits in one thread (``Event().wait()``);
its pool's idle workers wait on their task queue (helpers): neither is this shape.
analyze/threadpatterns.py ``orphan_wait`` takes the case where the output says the producer
thread died.
"""

from __future__ import annotations

from hangscope.analyze.threadedges import blocked, user_frame
from hangscope.analyze.threadpatterns import could_produce, died_threads, notified_wait, runs_task
from hangscope.analyze.waitwalk import Graph, hop, thread_names, waits_into
from hangscope.model import Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_SIGNALLED = ("Condition.wait", "Event.wait", "Condition.wait_for")


def lost_wakeup(g: Graph) -> WaitPattern | None:
    """Every thread of one process waits to be notified by another of its threads."""
    for proc in g.snap.processes:
        if proc.is_exited or not proc.threads or died_threads(proc):
            continue
        threads = [t for t in proc.threads if t.python and (not t.helper or runs_task(t))]
        if len(threads) < 2 or any(could_produce(t) or not blocked(t) for t in threads) or any(
                "asyncio" in (f.file or "") for t in threads for f in t.frames if not f.native):
            continue
        signalled = [t for t in threads if _direct(t)]
        if not signalled:
            continue
        groups: dict[tuple[str, str], list[Thread]] = {}
        for thread in threads:
            frame = notified_wait(thread)
            inner = user_frame(thread)
            site = f"{inner.name} ({inner.short_file}:{inner.line})" if inner else "?"
            groups.setdefault((frame.name if frame else "?", site), []).append(thread)
        parts = []
        for (call, site), members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            names = thread_names(sorted(members, key=lambda t: t.tid))
            verb = "waits" if len(members) == 1 else "wait"
            parts.append(f"{names} {verb} in {call} at {site}")
        waiters, into = waits_into(g, proc.pid)
        chain = (f"every thread of {who(proc)} waits for another of its threads to wake it, "
                 f"and none runs to: {'; '.join(parts)}. Nothing else runs in the process "
                 "(no thread computes, reads, sleeps or waits for a child): the notify came "
                 "before the wait (notify_all() before the waiters waited), or a wait has no "
                 "predicate; wait with Condition.wait_for(predicate) and notify after the "
                 "state changes")
        if into:
            chain += "; " + "; ".join(hop(g, i) for i in into)
        return WaitPattern("lost_wakeup", (proc.pid, *waiters), chain, tuple(into), proc.pid,
                           signalled[0].tid)
    return None


def _direct(thread: Thread) -> bool:
    """The program itself calls Condition.wait or Event.wait (not through a queue or a pool)."""
    frame = notified_wait(thread)
    return frame is not None and frame.name in _SIGNALLED
