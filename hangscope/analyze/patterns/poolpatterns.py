"""The wait-for graph's patterns of ``multiprocessing.Pool``: a result nobody computes, a pool
saturated by tasks waiting for tasks (read in analyze/patterns/waitpatterns.py's order).

- a result nobody computes: a driver waits on its Pool while every worker idles (a task lost
  with a worker that died: the replacement is named by its start time);
- a saturated pool: a driver waits on its Pool while every worker is inside a task that waits
  on the pool's family (tasks waiting for tasks queued behind them).
"""

from __future__ import annotations

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.graph.threadedges import blocked as _blocked
from hangscope.analyze.graph.waitwalk import Graph, hop, site_words, thread_words
from hangscope.analyze.patterns.threadpatterns import future_wait
from hangscope.frameworks import helper_role
from hangscope.model import Frame, Process, Role, Thread, in_library
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def _driver_wait(proc: Process) -> Thread | None:
    """The thread of ``proc`` blocked waiting on its Pool: its working or its main thread (not
    a pool's handler threads)."""
    return next((t for t in proc.threads if t.tid in (proc.working_tid, proc.pid)
                 and _blocked(t) and _in_pool_wait(t)), None)


def _in_pool_wait(thread: Thread) -> bool:
    return _pool_wait_frames(thread.frames)


@per_stack  # asked of every rank's working thread: once per distinct stack
def _pool_wait_frames(frames: tuple[Frame, ...]) -> bool:
    return any(not f.native and f.file and f.file.endswith("multiprocessing/pool.py")
               and f.name.rsplit(".", 1)[-1] in ("get", "wait", "next", "__next__")
               for f in frames)


def _pool_worker_idle(proc: Process) -> bool:
    """A Pool worker's main thread blocked waiting for its next task (not inside one)."""
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    return main is not None and _blocked(main) and _pool_frames(main) is not None \
        and _pool_task(main) is None


def _pool_frames(thread: Thread) -> list[Frame] | None:
    """The Python frames inside ``multiprocessing.pool.worker`` (innermost first), or None:
    the thread is no Pool worker."""
    python = [f for f in thread.frames if not f.native]
    at = next((k for k, f in enumerate(python) if f.file and f.name.rsplit(".", 1)[-1]
               == "worker" and f.file.endswith("multiprocessing/pool.py")), None)
    return None if at is None else python[:at]


def _pool_task(thread: Thread) -> Frame | None:
    """The task function a Pool worker runs (past map's ``mapstar``), or None: it waits for a
    task (its frame inside ``worker`` is the task queue's ``get``)."""
    inner = _pool_frames(thread)
    while inner and inner[-1].name in ("mapstar", "starmapstar"):
        inner = inner[:-1]
    if not inner or (inner[-1].file or "").endswith(("multiprocessing/queues.py",
                                                     "multiprocessing/connection.py")):
        return None
    return inner[-1]


def pool_saturated(g: Graph) -> WaitPattern | None:
    """A driver waits on its Pool while every worker is inside a task that itself waits on
    the job (a Manager queue, another task's result): the tasks they wait for are queued
    behind them, and no worker is free to run them."""
    for proc in g.having(_pool_wait_frames):  # (a driver waits on its Pool: none elsewhere)
        waiting = _driver_wait(proc)
        if waiting is None:
            continue
        workers = [p for p in g.snap.processes if p.ppid == proc.pid and not p.is_exited
                   and (main := next((t for t in p.threads if t.tid == p.pid), None))
                   is not None and _pool_frames(main) is not None]
        if not workers:
            continue
        family = {proc.pid, *(p.pid for p in g.snap.processes if p.ppid == proc.pid)}
        # A producer of the family still at work (its stack moves) may yet feed the tasks.
        if any(p.pid in family and p not in workers and not p.is_exited and not _manager(p)
               and (t := p.working_thread) is not None and not _blocked(t)
               for p in g.snap.processes):
            continue
        hops: list[str] = []
        edges: list[int] = []
        for worker in workers:
            main = next(t for t in worker.threads if t.tid == worker.pid)
            task = _pool_task(main)
            path, _ = g.walk(worker.pid, worker.pid)
            # Inside a task, blocked, on a wait that stays in the driver's family (its Manager,
            # the driver, another worker): not on a server outside the job, not working.
            if task is None or not _blocked(main) or not path or any(
                    g.edges[k].to_pid not in family for k in path):
                break
            hops.append(f"in task {task.name} ({task.short_file}:{task.line}), "
                        + hop(g, path[0]))
            edges.extend(path[:1])
        else:
            servers = {g.edges[k].to_pid for k in edges}
            if len(servers) == 1 and (server := g.procs.get(servers.pop() or 0)) is not None \
                    and _manager(server):
                hops.append(f"{who(server)} is the multiprocessing Manager: it only serves "
                            "the queues and events, idle until some task puts or sets")
            chain = (f"{who(proc)} waits for a result of its multiprocessing Pool"
                     f"{site_words(waiting)}, and all {len(workers)} workers are busy with tasks "
                     "that themselves wait: " + "; ".join(hops) + ": the pool is saturated by "
                     "tasks waiting for tasks, since what they wait for comes from tasks still "
                     "queued behind them with no free worker to run them; give the waiting "
                     "tasks a pool of their own, add workers, or submit the producers first")
            return WaitPattern("pool_saturated", (*(p.pid for p in workers), proc.pid), chain,
                               tuple(edges), workers[0].pid, workers[0].pid)
    return None


def lost_result(g: Graph) -> WaitPattern | None:
    for proc in g.having(_pool_wait_frames):  # (a driver waits on its Pool: none elsewhere)
        waiting = _driver_wait(proc)
        if waiting is None:
            continue
        workers = [p for p in g.snap.processes if p.ppid == proc.pid and not p.is_exited
                   and _pool_worker_idle(p)]
        others = [p for p in g.snap.processes if p.ppid == proc.pid and not p.is_exited
                  and p not in workers and p.role not in HELPER_ROLES
                  and p.threads and not _resource_tracker(p)]
        if not workers or others:
            continue
        starts = sorted((p.create_time or 0.0, p.pid) for p in workers)
        late = ""
        # The pool starts its workers together; a later one replaced a worker that died.
        if len(starts) > 1 and starts[-1][0] - starts[-2][0] >= 0.05:
            late = (f"; worker {starts[-1][1]} started {starts[-1][0] - starts[0][0]:.1f} s "
                    "after the pool's first workers: the pool replaced a worker that died "
                    "holding the task")
        lost = "the task was lost"
        fed = _feeder_waits(proc)
        if fed is not None:
            # The iterable handed to imap/map runs on the task handler, the one thread that
            # hands tasks to the workers: a wait on the pool there waits on itself.
            lost = (f"the Pool's task-handler thread (_handle_tasks) runs the iterable the "
                    f"tasks come from, and it waits there on the same pool at {fed.name} "
                    f"({fed.short_file}:{fed.line}): that thread alone hands tasks to the "
                    "workers, so the task it waits for is never handed out (python/cpython"
                    "#84291: imap consumes its iterable in that thread); do the work the "
                    "iterable needs outside the pool, or with another pool")
        elif not _pool_thread(proc, "_handle_results"):
            # The result handler is one thread of the Pool: gone, no result is ever delivered
            # (it dies on a result it cannot unpickle: an exception class whose __init__
            # takes other arguments than its args).
            lost = ("the Pool's result-handler thread (_handle_results) is gone: it died, "
                    "most often unpickling a worker's result or exception (the job's output "
                    "has its traceback), so no result is delivered")
        chain = (f"{who(proc)} waits for a result of its multiprocessing Pool{site_words(waiting)} "
                 f"while all {len(workers)} workers idle waiting for tasks: {lost}{late}" + (
                     "" if fed is not None else "; use concurrent.futures.ProcessPoolExecutor "
                     "(it raises BrokenProcessPool) or a timeout on get()"))
        return WaitPattern("lost_result", (proc.pid, *(p.pid for p in workers)), chain, (),
                           proc.pid, waiting.tid)
    return None


def _feeder_waits(proc: Process) -> Frame | None:
    """The program's frame in which the Pool's task-handler thread waits on a result of the
    same kind of pool (``ApplyResult.get`` below the iterable's own code); None."""
    for thread in proc.threads:
        frames = [f for f in thread.frames if not f.native]
        handler = next((k for k, f in enumerate(frames) if f.runs("_handle_tasks", _POOL)),
                       None)
        if handler is None:
            continue
        own = next((k for k, f in enumerate(frames[:handler]) if not in_library(f.file)), None)
        if own is not None and any(
                f.runs(name, _POOL) for f in frames[:own] for name in ("wait", "get")):
            return frames[own]
    return None


#: multiprocessing's Pool, as a frame's file ends.
_POOL = "multiprocessing/pool.py"


def pool_runs(proc: Process, function: str) -> bool:
    """A thread of ``proc`` runs the ``multiprocessing.Pool`` method ``function``
    (``_handle_workers``, ``_handle_results``, ...)."""
    return any(f.runs(function, "multiprocessing/pool.py") for t in proc.threads
               for f in t.frames)


def _pool_thread(proc: Process, function: str) -> bool:
    """A thread of ``proc`` runs the Pool's ``function`` (``_handle_results``, ...); True when
    the Pool's threads cannot be told (no thread has any Pool frame at all)."""
    return pool_runs(proc, function) or not (pool_runs(proc, "_handle_workers")
                                             or pool_runs(proc, "_handle_tasks"))


def _manager(proc: Process) -> bool:
    """A ``multiprocessing.managers`` server process (its main thread in serve_forever)."""
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    return main is not None and any(
        not f.native and (f.file or "").endswith("multiprocessing/managers.py")
        and f.name.rsplit(".", 1)[-1] == "serve_forever" for f in main.frames)


def _resource_tracker(proc: Process) -> bool:
    return helper_role(" ".join(proc.cmdline)) is Role.RESOURCE_TRACKER


def _executor_manager(proc: Process) -> Thread | None:
    """The ``ProcessPoolExecutor``'s manager thread of ``proc`` (it collects results and starts
    workers: ``_ExecutorManagerThread.run`` in concurrent/futures/process.py)."""
    return next((t for t in proc.threads if any(
        not f.native and (f.file or "").endswith("concurrent/futures/process.py")
        and f.name.endswith("_ExecutorManagerThread.run") for f in t.frames)), None)


def idle_executor(g: Graph) -> WaitPattern | None:
    """A thread waits on a future of a ``ProcessPoolExecutor`` whose manager thread is alive
    but which has no worker process left: nothing will run the pending work (workers that
    exited, a ``max_tasks_per_child`` recycle, were not replaced)."""
    if not g.has_file("concurrent/futures/process.py"):
        return None
    for proc in g.snap.processes:
        if proc.is_exited:
            continue
        manager = _executor_manager(proc)
        waiting = next((t for t in proc.threads if t is not manager and future_wait(
            t, ("result", "exception", "as_completed", "wait")) is not None), None)
        if manager is None or waiting is None:
            continue
        workers = [p for p in g.snap.processes if p.ppid == proc.pid and not p.is_exited
                   and any(not f.native and (f.file or "").endswith(
                       "concurrent/futures/process.py") for t in p.threads for f in t.frames)]
        if workers:
            continue
        exited = [p for p in g.snap.processes if p.ppid == proc.pid and p.is_exited]
        gone = (f"; {len(exited)} of its children exited" if exited else "")
        chain = (f"{thread_words(proc, waiting)} waits for a result of its ProcessPoolExecutor"
                 f"{site_words(waiting)}, and the executor has no worker process left (its "
                 f"manager thread {manager.name or manager.tid} waits for results that no "
                 f"worker will send){gone}: its workers exited and none was started in their "
                 "place (workers recycled by max_tasks_per_child, or killed); the pending "
                 "futures never run. Drop max_tasks_per_child, or wait with a timeout and "
                 "check the executor's processes")
        return WaitPattern("lost_result", (proc.pid,), chain, (), proc.pid, waiting.tid)
    return None
