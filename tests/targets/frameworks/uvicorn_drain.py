"""A supervisor that rolls its FastAPI metrics server (uvicorn) while a dashboard streams the
server's server-sent events:

    python uvicorn_drain.py MODE READY_FILE WORKDIR

The supervisor starts the server (``uvicorn.run``) and a dashboard (an aiohttp client reading
``/events``, an endless ``StreamingResponse``), then rolls the server for a new config:
SIGTERM, then ``Popen.wait()`` before it starts the replacement.

- ``drain``: uvicorn's graceful shutdown, with no deadline, waits for the open ``/events``
  response to end, which it never does; the server never exits and the supervisor waits in
  ``wait()`` for ever (uvicorn#451; blind round 32's 07).
- ``deadline``: the twin: ``timeout_graceful_shutdown=1``: the server exits after a second, the
  supervisor starts the replacement, the dashboard reconnects and streams again (healthy).

READY_FILE gets ``"<pid> server"`` from each server once it serves, ``"<pid> dashboard"`` once
the first event came, and ``"<pid> supervisor"`` once it sent SIGTERM (``drain``) or once the
replacement serves (``deadline``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def server(port: int, ready_file: str, deadline: bool) -> None:
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    @app.on_event("startup")
    async def announce() -> None:
        ready(ready_file, "server")

    @app.get("/events")
    async def events() -> StreamingResponse:
        async def stream():  # type: ignore[no-untyped-def]
            seq = 0
            while True:
                seq += 1
                yield f"data: seq={seq}\n\n"
                await asyncio.sleep(0.5)
        return StreamingResponse(stream(), media_type="text/event-stream")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="info",
                timeout_graceful_shutdown=1 if deadline else None)


def dashboard(port: int, ready_file: str) -> None:
    import aiohttp

    async def follow() -> None:
        told = False
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
            while True:
                try:
                    async with session.get(f"http://127.0.0.1:{port}/events") as response:
                        async for _line in response.content:
                            if not told:
                                ready(ready_file, "dashboard")
                                told = True
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.5)  # the server is rolling: reconnect

    asyncio.run(follow())


def _serving(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def supervisor(mode: str, ready_file: str, workdir: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(os.path.join(workdir, "server.log"), "ab")  # noqa: SIM115 (the children's)

    def start(role: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, __file__, role, ready_file, str(port),
                                 mode], stdout=log, stderr=subprocess.STDOUT)

    api = start("server")
    while not _serving(port):
        time.sleep(0.1)
    start("dashboard")
    while "dashboard" not in Path(ready_file).read_text():
        time.sleep(0.1)
    api.send_signal(signal.SIGTERM)  # roll it for the new config
    if mode == "drain":
        ready(ready_file, "supervisor")
    api.wait()
    start("server")
    while not _serving(port):
        time.sleep(0.1)
    ready(ready_file, "supervisor")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "server":
        server(int(sys.argv[3]), sys.argv[2], sys.argv[4] == "deadline")
    elif role == "dashboard":
        dashboard(int(sys.argv[3]), sys.argv[2])
    else:
        os.makedirs(sys.argv[3], exist_ok=True)
        supervisor(role, sys.argv[2], sys.argv[3])
