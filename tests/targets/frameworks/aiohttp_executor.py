"""An aiohttp embedding gateway whose handlers block in the event loop's default executor,
run as ``python aiohttp_executor.py MODE READY_FILE PORT`` (the gateway; its children are the
embedding backend and the load client).

Each ``POST /embed`` hands its text to a thread-safe micro-batcher through
``loop.run_in_executor(None, ...)`` (the loop's default executor, ``min(32, CPUs + 4)``
threads named ``asyncio_N``) and blocks there until its batch is embedded; an async flusher
takes each batch and posts it to the backend with an ``aiohttp.ClientSession``, then sets the
waiters' events. The client sends two requests more than the executor has threads, at once.

- ``dns``  the backend's URL names ``localhost``: aiohttp's default resolver runs
           ``getaddrinfo`` in the loop's default executor, whose every thread a handler holds,
           waiting for the flusher: the lookup is queued behind them and the flusher never
           posts (cpython#112169, aiohttp#6837; blind round 43's 05).
- ``ip``   the twin: the URL names 127.0.0.1, which needs no lookup; batches are embedded and
           the client sends again and again (progressing).

READY_FILE gets ``"<pid> backend"`` once the backend serves, and ``"<pid> gateway"`` two
seconds after the flusher began its first post (dns: the handlers and the post still
waiting) or once a batch came back (ip).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


class MicroBatcher:
    """Collects single texts into batches; each caller blocks until its batch is embedded."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[tuple[str, dict[str, object], float]] = []

    def submit_and_wait(self, text: str) -> object:
        slot: dict[str, object] = {"done": threading.Event(), "vec": None}
        with self.lock:
            self.pending.append((text, slot, time.monotonic()))
        slot["done"].wait()  # type: ignore[attr-defined]  # set by the flusher
        return slot["vec"]

    def take(self, most: int = 8, oldest_s: float = 0.5) -> list[tuple[str, dict[str, object]]]:
        with self.lock:
            if not self.pending or (len(self.pending) < most
                                    and time.monotonic() - self.pending[0][2] < oldest_s):
                return []
            batch, self.pending = self.pending[:most], self.pending[most:]
        return [(text, slot) for text, slot, _ in batch]


def gateway(mode: str, ready_file: str, port: int, backend: str) -> None:
    from aiohttp import ClientSession, web

    batcher = MicroBatcher()
    said: list[bool] = []

    async def flusher(app: web.Application) -> None:
        async with ClientSession() as session:
            while True:
                await asyncio.sleep(0.01)
                batch = batcher.take()
                if not batch:
                    continue
                print(f"flushing a batch of {len(batch)} to {backend}", flush=True)
                if not said and mode == "dns":  # the state: the post waits, and so do they
                    said.append(True)
                    threading.Timer(2.0, ready, (ready_file, "gateway")).start()
                async with session.post(backend, json={"texts": [t for t, _ in batch]}) as r:
                    vectors = (await r.json())["vectors"]
                for (_, slot), vector in zip(batch, vectors, strict=True):
                    slot["vec"] = vector
                    slot["done"].set()  # type: ignore[attr-defined]
                if not said:
                    said.append(True)
                    ready(ready_file, "gateway")

    async def start(app: web.Application) -> None:
        app["flusher"] = asyncio.create_task(flusher(app))

    async def embed(request: web.Request) -> web.Response:
        body = await request.json()
        loop = asyncio.get_running_loop()
        vector = await loop.run_in_executor(None, batcher.submit_and_wait, body["text"])
        return web.json_response({"vector": vector})

    app = web.Application()
    app.on_startup.append(start)
    app.router.add_post("/embed", embed)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


def backend_server(port: int, ready_file: str) -> None:
    from aiohttp import web

    async def embed(request: web.Request) -> web.Response:
        texts = (await request.json())["texts"]
        return web.json_response({"vectors": [[float(len(t)), 0.5] for t in texts]})

    async def started(app: web.Application) -> None:
        ready(ready_file, "backend")

    app = web.Application()
    app.on_startup.append(started)
    app.router.add_post("/embed", embed)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


def client(port: int, mode: str) -> None:
    """Two requests more than the default executor's threads, at once (once the gateway
    serves); again and again."""
    deadline = time.monotonic() + 60
    while not _serving(port):
        if time.monotonic() > deadline:
            raise SystemExit("the gateway never served")
        time.sleep(0.05)

    def one(n: int) -> None:
        while True:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/embed", data=json.dumps({"text": f"doc {n}"}).encode(),
                headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request) as response:
                response.read()
            if mode == "dns":
                return

    threads = [threading.Thread(target=one, args=(n,))
               for n in range(min(32, (os.cpu_count() or 1) + 4) + 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _serving(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def main() -> None:
    mode, ready_file, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    me = [sys.executable, __file__]
    backend_port = port + 1
    subprocess.Popen([*me, "backend", str(backend_port), ready_file])
    host = "localhost" if mode == "dns" else "127.0.0.1"
    deadline = time.monotonic() + 60
    while not (os.path.exists(ready_file) and "backend" in open(ready_file).read()):  # noqa: SIM115
        if time.monotonic() > deadline:
            raise SystemExit("the backend never served")
        time.sleep(0.05)
    subprocess.Popen([*me, "client", str(port), mode])
    gateway(mode, ready_file, port, f"http://{host}:{backend_port}/embed")


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "backend":
        backend_server(int(sys.argv[2]), sys.argv[3])
    elif role == "client":
        client(int(sys.argv[2]), sys.argv[3])
    else:
        main()
