"""A FastAPI service on uvicorn whose lifespan forks a batch worker, run as
``python uvicorn_forked_worker.py MODE READY_FILE WORKDIR``.

The lifespan starts the worker with ``multiprocessing`` (fork) while uvicorn serves, and stops
it at shutdown with ``terminate()`` and ``join()``; the worker takes jobs from a queue, waking
each second to check for one. The launcher sends the service SIGTERM (a restart) once the
worker is up.

- ``fork``: the worker is forked while uvicorn's signal handlers are installed
  (``Server.capture_signals``): it inherits uvicorn's SIGTERM handler, which only sets the
  child's copy of ``should_exit``, so ``terminate()`` does not end it and the service waits in
  ``join()`` for ever (Kludex/uvicorn#2289; blind round 36's 08).
- ``spawn``: the twin: the worker is started with the spawn context (a fresh interpreter, the
  default handlers): terminate() ends it, the service exits, and the launcher starts the next
  one, which serves on with its own worker (idle: no request comes).

READY_FILE gets ``"<pid> service"`` once a service is up with its worker,
``"<pid> worker"`` from the worker, ``"<pid> stopping"`` once a service's shutdown began and
``"<pid> restarted"`` from the launcher once the next service is up (``spawn`` only).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def batch_worker(jobs: multiprocessing.Queue, ready_file: str) -> None:
    ready(ready_file, "worker")
    while True:
        try:
            texts = jobs.get(timeout=1.0)
        except queue.Empty:
            continue
        print("embedded", len(texts), flush=True)


def service(ready_file: str, mode: str) -> None:
    import uvicorn
    from fastapi import FastAPI

    context = multiprocessing.get_context(mode)
    jobs = context.Queue()
    worker = context.Process(target=batch_worker, args=(jobs, ready_file), daemon=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        worker.start()
        ready(ready_file, "service")
        yield
        ready(ready_file, "stopping")
        worker.terminate()
        worker.join()  # fork: waits for ever; the worker caught SIGTERM

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    uvicorn.run(app, host="127.0.0.1", port=0, log_level="info")


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    for started in (1, 2):  # a process manager: start the service, restart it once (a deploy)
        proc = subprocess.Popen([sys.executable, __file__, "service", ready_file, mode])
        while True:  # until its worker is up
            tags = open(ready_file).read().split() if os.path.exists(ready_file) else []  # noqa: SIM115
            if tags.count("worker") == tags.count("service") == started:
                break
            time.sleep(0.05)
        if started == 1:
            proc.send_signal(signal.SIGTERM)
        else:
            ready(ready_file, "restarted")
        proc.wait()


if __name__ == "__main__":
    if sys.argv[1] == "service":
        service(sys.argv[2], sys.argv[3])
    else:
        main()
