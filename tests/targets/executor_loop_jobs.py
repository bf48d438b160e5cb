"""Real jobs where an asyncio service hands work to a thread pool whose task needs the loop.

    python executor_loop_jobs.py MODE READY_FILE WORKDIR

The ``feature-service`` runs an asyncio loop; a request handler (a coroutine) submits a
``lookup`` task to a ``ThreadPoolExecutor``, and the task asks the loop for a cached value
with ``asyncio.run_coroutine_threadsafe(...).result()``. Each process appends
``"<pid> <tag>"`` to READY_FILE when it is where it stays. Modes:

- ``blocking`` the coroutine waits for the task with ``future.result()``, on the loop's
               thread: the loop cannot run the coroutine the task waits for (hung).
- ``awaiting`` the coroutine awaits the task (``loop.run_in_executor``): the loop runs the
               task's coroutine, and requests are served every 0.2 s (healthy).

And a pool that needs itself, with no loop (the CPython docs' concurrent.futures "Deadlock"
example; langchain-ai/langchain#10638, xorq-labs/xorq#2243):

- ``nested``    a crawler's 3-thread pool runs 3 ``crawl_site`` tasks, each submitting its
                ``fetch_page`` tasks to that same pool and waiting for them in
                ``concurrent.futures.wait``: every worker waits, the pages queue behind them
                (hung).
- ``nested_ok`` the twin: 8 workers, so the pages find free ones; round after round (healthy).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


async def cached(key: str) -> str:
    return key.upper()


def lookup(loop: asyncio.AbstractEventLoop, key: str) -> str:
    return asyncio.run_coroutine_threadsafe(cached(key), loop).result()


async def serve(mode: str, ready_file: str) -> None:
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="lookup")
    if mode == "blocking":
        future = pool.submit(lookup, loop, "user:7")
        ready(ready_file, "service")
        future.result()  # on the loop's own thread
        return
    ready(ready_file, "service")
    while True:
        await loop.run_in_executor(pool, lookup, loop, "user:7")
        await asyncio.sleep(0.2)


def fetch_page(site: int, page: int) -> int:
    return sum(range(site * 1000 + page * 10))


def crawl_site(pool: concurrent.futures.ThreadPoolExecutor, site: int) -> int:
    pages = [pool.submit(fetch_page, site, page) for page in range(4)]
    done, _ = concurrent.futures.wait(pages)  # on the pool this task runs in
    return sum(f.result() for f in done)


def crawl(mode: str, ready_file: str) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(3 if mode == "nested" else 8,
                                                 thread_name_prefix="crawler")
    told = False
    while True:
        sites = [pool.submit(crawl_site, pool, site) for site in range(3)]
        if not told:
            told = True
            ready(ready_file, "crawler")
        for future in concurrent.futures.as_completed(sites):
            future.result()


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    setproctitle.setproctitle("crawler" if mode.startswith("nested") else "feature-service")
    if mode.startswith("nested"):
        crawl(mode, ready_file)
        return
    asyncio.run(serve(mode, ready_file))


if __name__ == "__main__":
    main()
