"""Real jobs whose request threads hand coroutines to a side asyncio loop.

    python stopped_loop_jobs.py MODE READY_FILE WORKDIR

The ``embed-frontend`` runs a side event loop in a ``side-loop`` thread and three
``request-N`` threads that each call ``asyncio.run_coroutine_threadsafe(embed(x),
loop).result()``. Each process appends ``"<pid> <tag>"`` to READY_FILE when it is where it
stays. Modes:

- ``stopped`` a reload stops the side loop (``loop.stop()``) and its thread ends before the
              requests come: their futures are never completed (hung).
- ``running`` the side loop runs: every request is answered, again every 0.2 s (healthy).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


async def embed(x: int) -> int:
    return x * 2


def request(loop: asyncio.AbstractEventLoop, index: int, again: bool) -> None:
    while True:
        asyncio.run_coroutine_threadsafe(embed(index), loop).result()
        if not again:
            return
        time.sleep(0.2)


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    setproctitle.setproctitle("embed-frontend")
    loop = asyncio.new_event_loop()
    side = threading.Thread(target=loop.run_forever, name="side-loop")
    side.start()
    if mode == "stopped":
        loop.call_soon_threadsafe(loop.stop)  # a reload that forgets to start it again
        side.join()
    again = mode == "running"
    threads = [threading.Thread(target=request, args=(loop, i, again), name=f"request-{i}")
               for i in range(3)]
    for t in threads:
        t.start()
    ready(ready_file, "frontend")
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
