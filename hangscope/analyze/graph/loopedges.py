"""Where an asyncio event loop runs, and the wait-for edge of a thread waiting on a future that
only that loop can complete.

Pure, over classified threads. A thread runs an event loop when its own Python frames pass
through asyncio's ``run_forever``/``_run_once``. Its own: a child forked by multiprocessing
from inside a coroutine still shows the parent's loop frames above
``BaseProcess._bootstrap`` (fork copies the stack), but it never returns to them: it runs the
process target and exits.

A thread other than the loop's that blocks in ``concurrent.futures.Future.result()``, with no
executor worker of its process busy on a task that could complete it, waits on a future
``asyncio.run_coroutine_threadsafe`` handed it: the loop completes it, when it runs. If the loop's
thread is itself blocked in a synchronous call (``Thread.join()`` of that very thread), the two
wait for each other: the cycle of analyze/patterns/waitpatterns.py names it. In a process with
no loop, such a thread waits for its thread pool's tasks: each executor worker running one
(``pool.map`` of requests, its main thread in the results' ``Future.result()``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hangscope.analyze.graph.threadedges import blocked, runs_task
from hangscope.model import Frame, Process, Thread
from hangscope.model.waits import WaitEdge

LOOP = ("_run_once", "run_forever", "run_until_complete")
#: The object of an edge to the pool worker whose task a thread's Future.result() waits for.
TASK_OF = "the pool task of thread"


def own_frames(thread: Thread) -> list[Frame]:
    """The thread's Python frames, innermost first, up to a forked child's entry (the frames
    above multiprocessing's ``BaseProcess._bootstrap`` are the parent's, copied by fork)."""
    return own_python(thread.frames)


def own_python(frames: Sequence[Frame]) -> list[Frame]:
    """:func:`own_frames` of a stack."""
    python = [f for f in frames if not f.native]
    for k, frame in enumerate(python):
        if (frame.file or "").endswith("multiprocessing/process.py") \
                and frame.name.rsplit(".", 1)[-1] == "_bootstrap":
            return python[:k + 1]
    return python


def idle_loop(thread: Thread) -> bool:
    """An asyncio loop's thread asleep in its selector, blocked the whole window: the
    coroutines it runs all await something; it computes nothing. uvloop's loop is libuv's,
    native under the Python call that runs it (``asyncio.Runner.run`` -> ``uv_run``): asleep
    in its poll there, with no Python frame above that call, it idles the same way."""
    python = [f for f in thread.frames if not f.native]
    if not python or not blocked(thread):
        return False
    if loop_index(thread) is not None and (python[0].file or "").endswith("selectors.py"):
        return True
    return (python[0].file or "").endswith(_UV_RUNNERS) and any(
        f.native and f.name == "uv_run" for f in thread.frames)


#: The Python calls that run a uvloop loop (its ``run()`` or asyncio's runner over it).
_UV_RUNNERS = ("asyncio/runners.py", "uvloop/__init__.py")


def loop_index(thread: Thread) -> int | None:
    """The index in :func:`own_frames` of the asyncio loop frame the thread runs, if any."""
    return loop_at(own_frames(thread))


def loop_at(python: Sequence[Frame]) -> int | None:
    """The index in these Python frames (innermost first) of the loop that runs them: asyncio's
    own loop frame, or, for a loop written in C (uvloop, which vLLM's and SGLang's servers
    run), the Python call that started it (``asyncio.Runner.run``, ``uvloop.run``): the
    coroutines and callbacks such a loop runs sit right inside that call, with no Python frame
    of the loop's between (0: the loop itself waits for its next event)."""
    runner = None
    for k, f in enumerate(python):
        if not f.file:
            continue
        if "asyncio" in f.file and f.name.rsplit(".", 1)[-1] in LOOP:
            return k
        if runner is None and f.file.endswith(_UV_RUNNERS) \
                and f.name.rsplit(".", 1)[-1] == "run":
            runner = k
    return runner


def _future_result(thread: Thread) -> bool:
    return any((f.file or "").endswith("concurrent/futures/_base.py")
               and f.name.rsplit(".", 1)[-1] in ("result", "exception")
               for f in own_frames(thread)[:4])


def loop_future_edges(proc: Process) -> Iterator[WaitEdge]:
    """Each blocked thread in ``Future.result()`` outside the one loop thread of its process
    -> that loop thread, when no executor worker is busy on anything but such a wait."""
    loops = [t for t in proc.threads if loop_index(t) is not None]
    if not loops:
        yield from _pool_result_edges(proc)
        return
    # A worker that waits in Future.result() itself completes no future: only a worker busy
    # otherwise may be the one a result waits for (an executor task waiting on the loop is
    # how a pool worker hands work to it).
    if len(loops) != 1 or any(runs_task(t) and not (blocked(t) and _future_result(t))
                              for t in proc.threads):
        return
    loop = loops[0]
    workers = []
    for thread in proc.threads:
        if thread.tid == loop.tid or not blocked(thread) or not _future_result(thread):
            continue
        if runs_task(thread):
            workers.append(thread)
        yield WaitEdge(proc.pid, thread.tid, "loop",
                       f"the asyncio event loop (thread {loop.name or loop.tid})",
                       "concurrent.futures Future.result() outside the loop's thread, no "
                       "executor worker busy: a run_coroutine_threadsafe future, which the "
                       "loop completes", to_pid=proc.pid, to_tid=loop.tid, probable=True)
    if workers and blocked(loop) and _future_result(loop):
        # The loop's own thread blocks on a future too: the pool tasks that wait for the loop
        # are the only work running, so that future is one of theirs (a coroutine that
        # submitted a task and waits for it synchronously).
        for worker in workers:
            yield WaitEdge(proc.pid, loop.tid, "thread", f"{TASK_OF} {worker.name or worker.tid}",
                           "concurrent.futures Future.result() on the loop's thread while "
                           "this pool worker runs the only task: its future", to_pid=proc.pid,
                           to_tid=worker.tid, probable=True)


def _pool_result_edges(proc: Process) -> Iterator[WaitEdge]:
    """Each blocked thread in ``Future.result()`` that is no pool worker itself -> each
    executor worker of its process running a task (probable where there are several)."""
    waiting = [t for t in proc.threads if blocked(t) and _future_result(t)]
    tasks = [t for t in proc.threads if runs_task(t)] if waiting else []
    pool = {t.tid for t in tasks}
    for thread in waiting:
        if thread.tid in pool:
            continue
        for worker in tasks:
            yield WaitEdge(proc.pid, thread.tid, "thread", f"{TASK_OF} {worker.name or worker.tid}",
                           "concurrent.futures Future.result() while this pool worker runs a "
                           "task: its result", to_pid=proc.pid, to_tid=worker.tid,
                           probable=len(tasks) > 1)
