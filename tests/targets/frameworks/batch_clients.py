"""A FastAPI micro-batcher under uvicorn and a client that posts through a thread pool:

    python batch_clients.py MODE READY_FILE WORKDIR

The client maps its requests over a ``ThreadPoolExecutor`` of 3 (``pool.map``), its main
thread in the results' ``Future.result()``; the server's ``/embed`` joins a batch that runs
once 8 requests wait or the window closes.

- ``stalled``: the window's deadline is computed from two clocks (``time.time()`` against the
  loop's monotonic ``loop.time()``): decades away, so 3 requests never make a batch and each
  handler awaits forever (ray#33052; blind round 34's 06).
- ``flowing``: the twin: one clock; each batch runs 20 ms after its first request (healthy).

READY_FILE gets ``"<pid> server"`` once it serves and ``"<pid> client"`` once its first
requests are sent (``stalled``) or answered (``flowing``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from server_pair import ready, run


def server(port: int, ready_file: str, mode: str) -> None:
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()
    waiting: list[asyncio.Future[int]] = []
    state: dict[str, float] = {}
    flushes: set[asyncio.Task[None]] = set()

    async def flush_after(window: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), timeout=window)
        batch, waiting[:] = list(waiting), []
        for n, future in enumerate(batch):
            future.set_result(n)

    @app.post("/embed")
    async def embed() -> dict:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        waiting.append(future)
        if len(waiting) == 1:  # a new batch: its window opens
            state["start"] = time.time() if mode == "stalled" else loop.time()
            window = 0.02 - (loop.time() - state["start"])
            flush = asyncio.ensure_future(flush_after(window))
            flushes.add(flush)
            flush.add_done_callback(flushes.discard)
        return {"slot": await future}

    @app.on_event("startup")
    async def up() -> None:
        ready(ready_file, "server")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _post(url: str) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST")) as r:
        return json.loads(r.read())


def client(port: int, ready_file: str, mode: str) -> None:
    url = f"http://127.0.0.1:{port}/embed"
    with ThreadPoolExecutor(3, thread_name_prefix="embed") as pool:
        if mode == "stalled":
            threading.Timer(1.0, ready, (ready_file, "client")).start()
        told = mode == "stalled"
        while True:
            list(pool.map(_post, [url] * 3))
            if not told:
                ready(ready_file, "client")
                told = True


if __name__ == "__main__":
    run(__file__, server, client)
