"""A pool starved by its own tasks: every worker waits for what a queued task would do.

Two shapes. A thread pool (``own_pool``): every worker thread of one ``ThreadPoolExecutor``
runs a task blocked in ``Future.result()``, on futures it submitted to that same executor
(the CPython docs' "Deadlock" example; langchain#10638); they are queued behind the tasks
that wait for them, and no worker is free.

``ProcessPoolExecutor(max_workers=3)`` is given 3 tasks that wait on a Manager ``Event`` and
then the 1 task that sets it: the 3 take every worker and block in ``EventProxy.wait``; the
one that would set the event waits in the call queue for a worker that never frees. The
Manager's serving threads wait in the hosted ``Event.wait`` for their clients; the driver
waits for the futures. Nothing in the job is stuck on its own account: the pool's order is.
The process facts: the driver's executor manager thread, its workers (children of it in
``concurrent.futures.process``'s worker loop or ``multiprocessing.pool``'s), each blocked in a
Manager proxy call, and the Manager threads serving them in a thread-to-thread wait.
"""

from __future__ import annotations

from hangscope.analyze.graph.loopedges import idle_loop
from hangscope.analyze.graph.threadedges import blocked, executor_worker, runs_task, user_frame
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.patterns.threadpatterns import could_produce
from hangscope.model import Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_WORKER_LOOPS = (("concurrent/futures/process.py", "_process_worker"),
                 ("multiprocessing/pool.py", "worker"))
_WAITS = ("wait", "wait_for", "acquire", "get", "join")


def _in(thread: Thread, file: str, name: str) -> bool:
    return any(f.runs(name, file) for f in thread.frames)


def _proxy_wait(thread: Thread) -> bool:
    """Blocked in a Manager proxy's method that waits (``EventProxy.wait``, a hosted
    Condition's, a Queue proxy's ``get``)."""
    return blocked(thread) and _in(thread, "multiprocessing/managers.py", "_callmethod")


def _hosted_wait(thread: Thread) -> bool:
    """A Manager's serving thread inside the hosted object's wait (``Event.wait``)."""
    return _in(thread, "multiprocessing/managers.py", "serve_client") and any(
        not f.native and (f.file or "").endswith(("threading.py", "queue.py"))
        and f.name.rsplit(".", 1)[-1] in _WAITS for f in thread.frames)


def starved_pool(g: Graph) -> WaitPattern | None:
    if not g.has_file("multiprocessing/managers.py"):
        return None
    for driver in g.snap.processes:
        main = next((t for t in driver.threads if t.tid == driver.pid), None)
        if driver.is_exited or main is None or not blocked(main) or (not _in(
                main, "concurrent/futures/_base.py", "wait") and not _in(
                main, "concurrent/futures/_base.py", "result")):
            continue
        workers = [p for p in g.snap.processes if p.ppid == driver.pid and not p.is_exited
                   and (t := p.working_thread) is not None
                   and any(_in(t, f, n) for f, n in _WORKER_LOOPS)]
        if not workers or not all(_proxy_wait(p.working_thread) for p in workers
                                  if p.working_thread is not None):
            continue
        managers = [p for p in g.snap.processes if not p.is_exited and p not in workers
                    and any(_hosted_wait(t) for t in p.threads)]
        if not managers:
            continue
        first = workers[0].working_thread
        assert first is not None
        mine = user_frame(first)
        at = f" at {mine.name} ({mine.short_file}:{mine.line})" if mine else ""
        call = next((f for f in first.frames if not f.native and (f.file or "").endswith(
            "multiprocessing/managers.py") and f.name.rsplit(".", 1)[-1] != "_callmethod"), None)
        what = call.name if call is not None else "a Manager proxy call"
        chain = (f"all {len(workers)} workers of {who(driver)}'s process pool wait in "
                 f"{what}{at} on {who(managers[0])}, a multiprocessing Manager whose serving "
                 "threads wait for a client to set or release it, and no process that could "
                 f"is running: {thread_words(driver, main)} waits for their results"
                 f"{site_words(main)}. A task still queued behind them (the pool has no free "
                 "worker) is the one that would: submit it before the tasks that wait for it, "
                 "run it outside the pool, or give the pool more workers than waiting tasks")
        return WaitPattern("pool_starved", (driver.pid, *(p.pid for p in workers),
                                              managers[0].pid), chain, (), driver.pid,
                           main.tid)
    return None



def callback_wait(g: Graph) -> WaitPattern | None:
    """A done-callback that blocks on another future of its own ProcessPoolExecutor, run by
    the executor's management thread (``_ExecutorManagerThread``), the one thread that moves
    every result from the workers into its future: it waits for a result only it can deliver
    (add_done_callback runs the callback on that thread)."""
    if not g.has_file("concurrent/futures/process.py"):
        return None
    for proc in g.snap.processes:
        for thread in proc.threads:
            python = [f for f in thread.frames if not f.native]
            if proc.is_exited or not blocked(thread) or not python:
                continue
            names = [(f.file or "", f.name.rsplit(".", 1)[-1], f.name) for f in python]
            manager = any(file.endswith("concurrent/futures/process.py")
                          and full.startswith("_ExecutorManagerThread.") for file, _, full in names)
            callback = next((k for k, (file, name, _) in enumerate(names)
                             if file.endswith("concurrent/futures/_base.py")
                             and name == "_invoke_callbacks"), None)
            waits = next((k for k, (file, name, _) in enumerate(names)
                          if file.endswith("concurrent/futures/_base.py")
                          and name in ("result", "exception")), None)
            if not manager or callback is None or waits is None or waits > callback:
                continue
            inner = user_frame(thread)
            site = f" in {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
            chain = (f"thread {thread.name or thread.tid} of {who(proc)}, the management "
                     "thread of its ProcessPoolExecutor, runs a done-callback"
                     f"{site} that blocks in Future.result() on another future of the same "
                     "executor: that thread is the only one that moves a worker's result "
                     "into its future, so the result it waits for can never be delivered; "
                     "do not wait on futures in a done-callback (hand the work to another "
                     "thread, or chain with asyncio/wrap_future)")
            return WaitPattern("self_lock", (proc.pid,), chain, (), proc.pid, thread.tid)
    return None


def _waits_on_future(thread: Thread) -> bool:
    """Blocked in ``Future.result()`` / ``exception()`` or ``concurrent.futures.wait()``."""
    python = [f for f in thread.frames if not f.native][:5]
    return blocked(thread) and any(
        (f.file or "").endswith("concurrent/futures/_base.py")
        and f.name.rsplit(".", 1)[-1] in ("result", "exception", "wait") for f in python)


def own_pool(g: Graph) -> WaitPattern | None:
    """Every worker thread of one ThreadPoolExecutor runs a task blocked on a future, and no
    other thread of the process could complete one (an asyncio loop idle in its selector runs
    nothing; idle workers of another pool take nothing of this one's): the futures are tasks
    of the same executor, queued behind the tasks that wait for them."""
    if not g.has_file("concurrent/futures/thread.py"):
        return None
    for proc in g.snap.processes:
        if proc.is_exited:
            continue
        pools: dict[str, list[Thread]] = {}
        for thread in proc.threads:
            if executor_worker(thread):  # ThreadPoolExecutor names them f"{prefix}_{n}"
                pools.setdefault((thread.name or "").rpartition("_")[0], []).append(thread)
        for prefix, workers in pools.items():
            if not all(runs_task(t) and _waits_on_future(t) for t in workers):
                continue
            tids = {t.tid for t in workers}
            if any(t.tid not in tids and could_produce(t) and not idle_loop(t)
                   for t in proc.threads):
                continue  # another thread may be computing what they wait for
            first = workers[0]
            mine = user_frame(first)
            at = f" at {mine.name} ({mine.short_file}:{mine.line})" if mine else ""
            names = ", ".join(t.name or str(t.tid) for t in workers)
            loop = next((t for t in proc.threads if idle_loop(t)), None)
            idle = (f"; the asyncio event loop (thread {loop.name or loop.tid}) idles in its "
                    "selector, and anything it still logs or serves is not these tasks"
                    if loop is not None else "")
            chain = (f"all {len(workers)} worker threads of {who(proc)}'s ThreadPoolExecutor "
                     f"{prefix or ''} ({names}) run tasks that block in Future.result(){at}, "
                     "on futures submitted to that same executor: those tasks are queued "
                     "behind the ones that wait for them, and no worker is free to run them"
                     f"{idle}. Run the inner tasks on another executor, or inline")
            return WaitPattern("pool_starved", (proc.pid,), chain, (), proc.pid, first.tid)
    return None
