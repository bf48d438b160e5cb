"""A notifier left behind by fork: a forked child waits for a thread that exists only in its
parent (read in analyze/patterns/waitpatterns.py's order, before the orphaned waits).

``fork()`` copies only the thread that calls it. An object that owns a thread (a job
executor's reaper, a client's I/O thread, a batcher's flusher) and was made before the fork
reaches the child without it: the child's copy of the object still waits on its Condition,
Event or Queue for that thread, which runs on in the parent alone. The fact that says so is
in the two stacks: the child's only program thread waits in a method of a class whose own
thread, a method of that same class in that same file, runs in the parent (cpython#84559 and
the multiprocessing "fork with threads" reports), or waits for a ``concurrent.futures`` Future
that only the parent's event loop or pool threads would complete (a dataset that fetches
through ``asyncio.run_coroutine_threadsafe`` on a loop it started before the DataLoader forked
its workers: datachain#691, blind round 22's 05).
"""

from __future__ import annotations

from hangscope.analyze.evidence.working import notified_frames
from hangscope.analyze.graph.threadedges import user_frame
from hangscope.analyze.graph.waitwalk import Graph, hops_into, waits_into
from hangscope.analyze.patterns.threadpatterns import _bystander, _forked, notified_wait
from hangscope.model import Frame, Process, Thread, in_library
from hangscope.model.waits import WaitPattern
from hangscope.words import who, who_list


def _owner(thread: Thread) -> Frame | None:
    """The innermost program frame of a method (``Class.method``) the thread runs in."""
    return next((f for f in thread.frames if not f.native and "." in f.name
                 and not in_library(f.file)), None)


#: A wait for a ``concurrent.futures.Future`` (``asyncio.run_coroutine_threadsafe(...).result()``,
#: ``executor.submit(...).result()``), and the threads that complete one: an event loop's
#: (its coroutines), a thread pool's workers (their calls). The object's thread is then in
#: asyncio's or the pool's code, not a method of the object's own class.
_FUTURE_WAIT = ("result", "concurrent/futures/_base.py")
_FUTURE_MAKERS = (("run_forever", "asyncio/base_events.py"),
                  ("_worker", "concurrent/futures/thread.py"))


def _left_behind(parent: Process, owner: Frame, waiter: Thread) -> tuple[Thread, Frame] | None:
    """The parent's thread that runs another method of ``owner``'s class, in its file, or,
    where ``waiter`` waits for a Future, one that completes Futures (an event loop, a pool
    worker); with the frame that says so."""
    cls = owner.name.rsplit(".", 1)[0]
    future = any(f.runs(*_FUTURE_WAIT) for f in waiter.frames)
    for thread in parent.threads:
        if thread.tid == parent.pid:
            continue  # the forking thread: the child has its copy
        for f in thread.frames:
            if not f.native and f.file == owner.file and f.name.rsplit(".", 1)[0] == cls:
                return thread, f
            if future and any(f.runs(*maker) for maker in _FUTURE_MAKERS):
                return thread, f
    return None


def fork_notifier(g: Graph) -> WaitPattern | None:
    found: list[tuple[Process, Thread, Frame, tuple[Thread, Frame]]] = []
    for proc in g.having(notified_frames):  # (its main thread waits to be notified)
        parent = g.procs.get(proc.ppid or 0)
        main = next((t for t in proc.threads if t.tid == proc.pid), None)
        if proc.is_exited or parent is None or main is None or not main.python \
                or notified_wait(main) is None or not _forked(proc, parent):
            continue
        if not all(_bystander(t) for t in proc.threads if t.tid != main.tid):
            continue  # a thread of its own that works may still notify it
        owner = _owner(main)
        behind = _left_behind(parent, owner, main) if owner is not None else None
        if owner is not None and behind is not None:
            found.append((proc, main, owner, behind))
    if not found:
        return None
    proc, main, owner, behind = found[0]
    parent = g.procs[proc.ppid or 0]
    same = [p for p, _, o, _ in found if p.ppid == proc.ppid and o.name == owner.name]
    them = who_list(same)
    wait = notified_wait(main)
    where = f"{wait.name} at {owner.name} ({owner.short_file}:{owner.line})" if wait else \
        owner.name
    behind, runs_in = behind
    # an event loop's or a pool's thread: the loop it runs, not where it is in it just now
    inner = runs_in if in_library(runs_in.file) else user_frame(behind) or runs_in
    runs = f"{inner.name} ({inner.short_file}:{inner.line})"
    reaped = [k.pid for p in same for k in g.kids(p.pid) if k.is_exited]
    one = len(same) == 1
    its, it = ("its", "it") if one else ("their", "them")
    cls = owner.name.rsplit(".", 1)[0]
    chain = (f"{them} {'waits' if one else 'each wait'} in {where} for another thread to wake "
             f"{it}, and none of {its} threads can: the thread that does it, "
             f"{behind.name or behind.tid} at {runs}, runs only in {its} parent, {who(parent)}. "
             f"{'It was' if one else 'They were'} forked after the {cls} object started that "
             "thread, and fork copies only the thread that calls it")
    if reaped:
        chain += (f"; the work it waits for is done (child{'ren' if len(reaped) > 1 else ''} "
                  f"{', '.join(map(str, reaped[:4]))} exited, never reaped: the reaper is "
                  "the parent's)")
    waiters, into = waits_into(g, proc.pid)
    chain += hops_into(g, into)
    chain += ("; make the object after the fork (os.register_at_fork(after_in_child=...) "
              "to start its thread again), or start the children with spawn or forkserver")
    return WaitPattern("orphan_wait", (*(p.pid for p in same), *waiters), chain, tuple(into),
                       proc.pid, main.tid, tuple(p.pid for p in same[1:]))
