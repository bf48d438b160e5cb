"""A vLLM-shaped offline client and its engine child over pyzmq (PUSH/PULL, ipc://): the
client's output handler reads the engine's outputs, then the client finishes and leaves
``asyncio.run`` (blind round 38's 07; cpython#111358).

    python zmq_exit.py MODE READY_FILE WORKDIR

- ``executor_recv``  the handler hands the blocking ``recv_multipart`` to the loop's default
                     executor and is cancelled when the work is done: its thread stays in the
                     receive, the engine idles waiting for input, and ``asyncio.run`` joins
                     that thread at exit for ever (Python 3.11: no timeout).
- ``async_socket``   the twin: the handler reads through a ``zmq.asyncio`` socket; the
                     cancel ends it, ``asyncio.run`` returns, and the client sleeps before its
                     next batch (paused, nothing held).

READY_FILE gets ``"<pid> engine"`` from the engine and ``"<pid> client"`` from the client
once its results are in (just before it leaves the coroutine).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import sys
import time

REQUESTS = 20


def ready(path: str, role: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {role}\n")


def engine(ready_file: str, ipc: str) -> None:
    import zmq

    ctx = zmq.Context()
    inputs = ctx.socket(zmq.PULL)
    inputs.bind(f"ipc://{ipc}/input")
    outputs = ctx.socket(zmq.PUSH)
    outputs.connect(f"ipc://{ipc}/output")
    ready(ready_file, "engine")
    while True:
        rid = inputs.recv_pyobj()
        outputs.send_multipart([str(rid).encode(), b"done"])


async def evaluate(mode: str, ready_file: str, ipc: str) -> None:
    import zmq
    import zmq.asyncio

    loop = asyncio.get_running_loop()
    sync = mode == "executor_recv"
    ctx = zmq.Context() if sync else zmq.asyncio.Context()
    out = ctx.socket(zmq.PULL)
    out.bind(f"ipc://{ipc}/output")
    requests = zmq.Context().socket(zmq.PUSH)
    requests.connect(f"ipc://{ipc}/input")
    results: dict[bytes, bytes] = {}
    finished = asyncio.Event()

    async def output_handler() -> None:
        while True:
            if sync:
                rid, text = await loop.run_in_executor(None, out.recv_multipart)
            else:
                rid, text = await out.recv_multipart()
            results[rid] = text
            if len(results) == REQUESTS:
                finished.set()

    handler = asyncio.create_task(output_handler())
    for rid in range(REQUESTS):
        requests.send_pyobj(rid)
    await finished.wait()
    ready(ready_file, "client")
    handler.cancel()  # the front end "shuts down": its executor thread stays in recv


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    ipc = os.path.join(workdir, "ipc")
    os.makedirs(ipc, exist_ok=True)
    child = mp.get_context("spawn").Process(target=engine, args=(ready_file, ipc), daemon=True)
    child.start()
    asyncio.run(evaluate(mode, ready_file, ipc))
    time.sleep(3600)  # the next batch, later


if __name__ == "__main__":
    main()
