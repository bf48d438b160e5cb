"""The wait-for graph's lost wake-ups: every thread of a process waits for another thread of
it to notify it, and none runs to.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph). A thread in ``Event.wait``,
``Condition.wait``, ``Queue.get`` or ``Future.result`` waits for a thread of its own process to
set, notify, put or complete it. When every thread of the process is in such a wait, none
blocked in I/O, a sleep or a child, and at least one calls ``Condition.wait``/``Event.wait``
itself (not an executor's worker idling on its task queue), no thread is left to wake the
others: a notify sent before they waited (``notify_all()`` before ``wait()``), or a wait
without a predicate. A daemon that idles on purpose waits in one thread (``Event().wait()``);
its pool's idle workers wait on their task queue (helpers), and a library's own threads (no
frame of the program: Ray's GC thread) wait on events only that library sets: none is this
shape.
analyze/patterns/threadpatterns.py ``orphan_wait`` takes the case where the output says the producer
thread died.
"""

from __future__ import annotations

from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.evidence.working import notified_frames
from hangscope.analyze.graph.threadedges import blocked, library_thread, user_frame
from hangscope.analyze.graph.waitwalk import Graph, hops_into, thread_names, waits_into
from hangscope.analyze.patterns.threadpatterns import (
    could_produce,
    died_threads,
    notified_wait,
    program_threads,
)
from hangscope.model import Frame, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_SIGNALLED = ("Condition.wait", "Event.wait", "Condition.wait_for")


def lost_wakeup(g: Graph) -> WaitPattern | None:
    """Every thread of one process waits to be notified by another of its threads."""
    for proc in g.having(notified_frames):  # (_direct waits are notified waits)
        if proc.is_exited or not any(_direct(t) for t in proc.threads) or died_threads(proc):
            continue  # (no thread calls Condition/Event.wait itself: none is signalled below)
        # A library's own thread idling on its own event (Ray's GC thread beside a driver
        # parked on ``Event().wait()``) is not one the program's notify was meant for; one
        # that is not idling (Ray Data's prefetch thread in ``ray.get``, which fills the queue
        # the program's threads read) may be the producer.
        everyone = program_threads(proc)
        threads = [t for t in everyone if not library_thread(t)]
        if len(threads) < 2 or any(could_produce(t) or not blocked(t) for t in threads) or any(
                could_produce(t) for t in everyone if library_thread(t)) or any(
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
        chain += hops_into(g, into)
        return WaitPattern("lost_wakeup", (proc.pid, *waiters), chain, tuple(into), proc.pid,
                           signalled[0].tid)
    return None


def _direct(thread: Thread) -> bool:
    """The program itself calls Condition.wait or Event.wait (not through a queue or a pool)."""
    frame = notified_wait(thread)
    return frame is not None and frame.name in _SIGNALLED


def full_queue(g: Graph) -> WaitPattern | None:
    """Threads wait in ``queue.Queue.put`` for room in a bounded queue, and no thread of the
    process is left to take from it: every other one puts too, joins, or waits to be notified.
    A putter that runs its own Thread subclass's loop (``X.run`` calling ``X.write``) is the
    queue's likely consumer, blocked filling what it should drain (its output routed back
    into its own queue)."""
    for proc in g.having(_put_frames):  # (a thread in Queue.put: no putter elsewhere)
        if proc.is_exited:
            continue
        threads = program_threads(proc)
        putters = sorted((t for t in threads if _in_put(t) and blocked(t)), key=lambda t: t.tid)
        if not putters or any(could_produce(t) for t in threads if t not in putters):
            continue
        inner = user_frame(putters[0])
        site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
        verb = "waits" if len(putters) == 1 else "wait"
        chain = (f"{thread_names(putters)} of {who(proc)} {verb} in queue.Queue.put{site} for "
                 "room in a bounded queue, and no thread of the process is left to take from "
                 "it")
        own = next((t for t in putters if _own_loop(t)), None)
        if own is not None:
            loop = _own_loop(own)
            chain += (f"; thread {own.name or own.tid}, running its own loop {loop}, is itself "
                      "blocked putting into it: the thread meant to drain the queue fills it "
                      "(what it writes, its errors or its output, goes back into that queue)")
        waiters, into = waits_into(g, proc.pid)
        chain += hops_into(g, into)
        chain += ("; never put into a queue from its own consumer, and give put() a timeout "
                  "(or put_nowait and drop) where a full queue must not stop the producers")
        return WaitPattern("full_queue", (proc.pid, *waiters), chain, tuple(into), proc.pid,
                           (own or putters[0]).tid)
    return None


def _in_put(thread: Thread) -> bool:
    """Blocked in ``queue.Queue.put`` (its ``not_full`` Condition): the queue is full."""
    return _put_frames(thread.frames)


@per_stack  # asked of every thread of every rank: once per distinct stack
def _put_frames(frames: tuple[Frame, ...]) -> bool:
    return any(not f.native and (f.file or "").endswith("/queue.py")
               and f.name.rsplit(".", 1)[-1] == "put" for f in frames[:12])


def _own_loop(thread: Thread) -> str | None:
    """``LoggingThread.run``: a Thread subclass's own run() on the stack, under a method of
    the same class that made the put (the class is both the queue's consumer and producer)."""
    python = [f for f in thread.frames if not f.native and not (f.file or "").endswith(
        ("threading.py", "queue.py"))]
    run = next((f for f in python if f.name.endswith(".run")), None)
    if run is None:
        return None
    cls = run.name.rsplit(".", 1)[0]
    return run.name if any(f is not run and f.name.rsplit(".", 1)[0] == cls
                           for f in python) else None
