"""A real idle serving engine: an API server, its output-handler thread and an engine core.

    python engine_jobs.py MODE READY_FILE WORKDIR

Mode ``idle`` (vLLM's AsyncLLM / EngineCore shape): the API server's asyncio loop listens on a
port; its ``output_handler`` thread reads the engine's outputs in ``while True: ... =
conn.recv()``; the engine core process reads requests the same way on the other end of that
``multiprocessing.Pipe``. Nobody sends a request: both ends read, at the head of their loops,
waiting for work. Healthy: idle. Each process appends ``"<pid> <tag>"`` to READY_FILE before it
waits.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import sys
import threading

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def engine_core(conn: object, ready_file: str) -> None:
    setproctitle.setproctitle("EngineCore_0")
    ready(ready_file, "engine")
    while True:
        req = conn.recv()  # type: ignore[attr-defined]
        conn.send(("out", req))  # type: ignore[attr-defined]


def output_handler(conn: object, outputs: list[object]) -> None:
    while True:
        out = conn.recv()  # type: ignore[attr-defined]
        outputs.append(out)


async def serve(ready_file: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    ready(ready_file, "api")
    async with server:
        await server.serve_forever()


def main(ready_file: str) -> None:
    setproctitle.setproctitle("api_server")
    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe()
    ctx.Process(target=engine_core, args=(theirs, ready_file), daemon=True).start()
    outputs: list[object] = []
    threading.Thread(target=output_handler, args=(mine, outputs), name="output_handler_0",
                     daemon=True).start()
    asyncio.run(serve(ready_file))


if __name__ == "__main__":
    main(sys.argv[2])
