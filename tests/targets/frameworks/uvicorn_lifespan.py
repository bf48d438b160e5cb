"""A real FastAPI app under uvicorn's CLI whose lifespan starts a feature sidecar
(``asyncio.create_subprocess_exec``) and consumes its updates, run as
``python uvicorn_lifespan.py MODE READY_FILE PORT``. Modes:

- ``awaited``  the lifespan *awaits* its endless update consumer before ``yield``: uvicorn never
               finishes the startup, never binds the port, and its loop wakes for every
               update (uvicorn#2751, blind round 28's 07: it read "progressing").
- ``task``     the twin: the consumer runs as a task, the lifespan yields, the server listens
               and waits for requests (idle).
- ``loading``  the lifespan computes (a model's set-up, pure Python) for minutes before it
               yields: a slow startup, not a hung one.

READY_FILE gets ``"<pid> server"`` once the first update was applied (awaited, task) or the
computing began (loading).
"""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import asynccontextmanager

from fastapi import FastAPI

SIDECAR = ("import sys, time\n"
           "n = 0\n"
           "while True:\n"
           "    n += 1\n"
           "    print(n, flush=True)\n"
           "    time.sleep(0.5)\n")


def ready() -> None:
    with open(os.environ["HANGSCOPE_READY"], "a") as f:
        f.write(f"{os.getpid()} server\n")


async def consume_updates(app: FastAPI, sidecar: asyncio.subprocess.Process) -> None:
    assert sidecar.stdout is not None
    while True:
        line = await sidecar.stdout.readline()
        app.state.version = int(line)
        if app.state.version == 1:
            ready()


def set_up_model() -> float:
    total = 0.0
    for step in range(10**9):
        total += (step % 7) * 0.5
        if step == 1000:
            ready()
    return total


@asynccontextmanager
async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
    mode = os.environ["HANGSCOPE_MODE"]
    if mode == "loading":
        app.state.model = set_up_model()
    sidecar = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SIDECAR, stdout=asyncio.subprocess.PIPE)
    if mode == "awaited":
        await consume_updates(app, sidecar)  # the bug: awaited, not started as a task
    task = asyncio.create_task(consume_updates(app, sidecar))
    yield
    task.cancel()
    sidecar.kill()


app = FastAPI(lifespan=lifespan)


@app.get("/health")
async def health() -> dict[str, int]:
    return {"version": app.state.version}


def main() -> None:
    mode, ready_file, port = sys.argv[1:4]
    os.environ.update(HANGSCOPE_READY=ready_file, HANGSCOPE_MODE=mode)
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    os.execvp(sys.executable, [sys.executable, "-m", "uvicorn", "uvicorn_lifespan:app",
                               "--port", port, "--log-level", "info"])


if __name__ == "__main__":
    main()
