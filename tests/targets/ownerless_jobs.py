"""Locks that no running thread holds: every thread waits on one lock, and its holder is a
suspended generator, or nobody.

    python ownerless_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before it enters the call it stays
in. Modes:

- ``suspended`` (hung) a streaming handler is a generator that takes the model lock and yields
                chunks from inside the ``with`` block; the client disconnected after the
                first chunk, the server logged it and kept the half-consumed generator in
                its session table, so the lock stays held by a frame that never resumes;
                every request thread then waits on that lock at one site (the shape of
                "lock held across yield" reports: gradio-app/gradio#4016-style streaming
                hangs, fastapi StreamingResponse with a threading.Lock).
- ``dropped``   (hung) a cache's ``refresh`` takes the lock with ``acquire()`` and returns
                early on a timeout without releasing it; the refresh thread goes on to
                sleep between refreshes, every reader waits on the lock (a leaked lock:
                cpython#74102-style "acquire without release on an exception path").
"""

from __future__ import annotations

import os
import sys
import threading
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


MODEL_LOCK = threading.Lock()
SESSIONS: dict[str, object] = {}


def generate_stream(prompt: str):
    with MODEL_LOCK:
        for i in range(3):
            yield f"{prompt}:{i}"


def handle_request(n: int, ready_file: str, started: threading.Barrier) -> None:
    started.wait()
    if n == 0:
        ready(ready_file, "handlers")
    with MODEL_LOCK:  # every request thread waits here
        print("served", n, flush=True)


def suspended(ready_file: str) -> None:
    stream = generate_stream("hello")
    print("chunk", next(stream), flush=True)
    print("WARNING client 10.0.0.7 disconnected mid-stream; session kept", flush=True)
    SESSIONS["s-1"] = stream  # never resumed, never closed
    started = threading.Barrier(5)
    workers = [threading.Thread(target=handle_request, args=(i, ready_file, started),
                                name=f"request-{i}") for i in range(4)]
    for w in workers:
        w.start()
    started.wait()
    ready(ready_file, "server")
    for w in workers:
        w.join()


class Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value = 0

    def refresh(self, fail: bool) -> None:
        self.lock.acquire()
        if fail:
            print("refresh: upstream timed out", flush=True)
            return  # the lock is never released
        self.value += 1
        self.lock.release()

    def get(self) -> int:
        with self.lock:
            return self.value


def dropped(ready_file: str) -> None:
    cache = Cache()
    cache.refresh(fail=True)

    def reader(n: int) -> None:
        if n == 0:
            ready(ready_file, "readers")
        while True:
            cache.get()
            time.sleep(0.01)

    for i in range(3):
        threading.Thread(target=reader, args=(i,), name=f"reader-{i}", daemon=True).start()
    ready(ready_file, "refresher")
    while True:
        time.sleep(3600)  # the refresh thread sleeps until its next refresh


if __name__ == "__main__":
    os.makedirs(sys.argv[3], exist_ok=True)
    globals()[sys.argv[1]](sys.argv[2])
