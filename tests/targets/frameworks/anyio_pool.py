"""A FastAPI job queue under uvicorn whose result endpoint long-polls, and the clients and the
executor that use it:

    python anyio_pool.py MODE READY_FILE WORKDIR

44 client threads each submit a job and wait on ``GET /result/{id}`` (a long poll until the
job is done), then the next; the executor asks ``POST /claim`` for work, then completes it.

- ``sync``: the long poll is a sync ``def`` waiting on a ``threading.Event``: each holds one of
  AnyIO's 40 worker threads, and ``/claim`` (a sync endpoint too) never gets one: nothing is
  claimed, nothing completes (agronholm/anyio#721, fastapi#4221; blind round 33's 04).
- ``async``: the twin: the long poll is ``async def`` awaiting an ``asyncio.Event``; the claims
  run and the results come back, job after job, for as long as it runs (healthy).

READY_FILE gets ``"<pid> api"`` once it serves, ``"<pid> clients"`` once every long poll is
sent, ``"<pid> executor"`` once its first claim is sent (``sync``) or answered (``async``).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

JOBS = 44


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def api(port: int, ready_file: str, mode: str) -> None:
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()
    done: dict[int, threading.Event] = {}
    flags: dict[int, asyncio.Event] = {}
    queue: list[int] = []

    @app.post("/submit/{job}")
    async def submit(job: int) -> dict:
        done[job], flags[job] = threading.Event(), asyncio.Event()
        queue.append(job)
        return {"queued": job}

    if mode == "sync":
        @app.get("/result/{job}")
        def result(job: int) -> dict:
            done[job].wait()  # a long poll on one of AnyIO's worker threads
            return {"job": job}

        @app.post("/claim")
        def claim() -> dict:
            return {"job": queue.pop(0) if queue else None}
    else:
        @app.get("/result/{job}")
        async def result(job: int) -> dict:
            await flags[job].wait()
            return {"job": job}

        @app.post("/claim")
        async def claim() -> dict:
            return {"job": queue.pop(0) if queue else None}

    @app.post("/complete/{job}")
    async def complete(job: int) -> dict:
        done[job].set()
        flags[job].set()
        return {"completed": job}

    @app.on_event("startup")
    async def up() -> None:
        ready(ready_file, "api")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _call(url: str, method: str = "GET") -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, method=method)) as r:
        return json.loads(r.read())


def clients(port: int, ready_file: str) -> None:
    # Each of JOBS threads submits a job and long-polls its result, again and again: the async
    # twin keeps completing jobs for as long as the dump looks (a fixed batch could end inside
    # its window and leave only the executor's empty polls, which say nothing either way).
    base = f"http://127.0.0.1:{port}"
    ids, lock = iter(range(10**9)), threading.Lock()

    def one_after_another() -> None:
        while True:
            with lock:
                job = next(ids)
            _call(f"{base}/submit/{job}", "POST")
            _call(f"{base}/result/{job}")

    for _ in range(JOBS):
        threading.Thread(target=one_after_another, daemon=True).start()
    time.sleep(0.5)  # every first long poll sent
    ready(ready_file, "clients")
    while True:
        time.sleep(3600)


def executor(port: int, ready_file: str, mode: str) -> None:
    base = f"http://127.0.0.1:{port}"
    while "clients" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.1)
    told = False
    while True:
        if mode == "sync" and not told:
            threading.Timer(0.5, ready, (ready_file, "executor")).start()
            told = True
        job = _call(f"{base}/claim", "POST")["job"]
        if not told:
            ready(ready_file, "executor")
            told = True
        if job is None:
            time.sleep(0.2)
            continue
        time.sleep(0.05)  # render it
        _call(f"{base}/complete/{job}", "POST")


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    me = [sys.executable, __file__]
    subprocess.Popen([*me, "api", ready_file, str(port), mode])
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    subprocess.Popen([*me, "clients", ready_file, str(port), mode])
    executor(port, ready_file, mode)


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "api":
        api(int(sys.argv[3]), sys.argv[2], sys.argv[4])
    elif role == "clients":
        clients(int(sys.argv[3]), sys.argv[2])
    else:
        main()
