"""A FastAPI server (uvicorn, asyncio's loop) whose async endpoint runs a regular expression
synchronously on its event loop, and a client that posts to it:

    python loop_cpu.py MODE READY_FILE WORKDIR

The endpoint matches ``^(\\s+)+$`` against the request's text: nested quantifiers that
backtrack exponentially in the run of spaces when the text does not match (vllm#54678: a
tool-call parser's regex over a model's output ran for hours on the API server's loop).

- ``backtrack``: the client posts 40 spaces and a "!" once: the match runs for days on the
  loop's thread, on CPU; nothing else of the server runs (hung).
- ``steady``: the client posts 20 spaces and a "!" again and again: each match takes ~60 ms
  of the loop, which serves the next request in between (busy, healthy).

READY_FILE gets ``"<pid> server"`` once it serves, ``"<pid> parsing"`` from the server as the
endpoint starts its first match, and ``"<pid> client"`` once the client posted (``backtrack``)
or had its first answer (``steady``).
"""


# (no `from __future__ import annotations`: FastAPI resolves the endpoint's Request type
# from its annotation, which a string naming a local import would hide)
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

SPACES = {"backtrack": 40, "steady": 20}


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def server(port: int, ready_file: str) -> None:
    import uvicorn
    from fastapi import FastAPI, Request

    app = FastAPI()
    blank = re.compile(r"^(\s+)+$")
    told: list[bool] = []

    @app.post("/parse")
    async def parse(request: Request) -> dict:
        text = (await request.body()).decode()
        if not told:
            told.append(True)
            ready(ready_file, "parsing")
        return {"blank": blank.match(text) is not None}

    @app.on_event("startup")
    async def up() -> None:
        ready(ready_file, "server")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio")


def client(port: int, ready_file: str, mode: str) -> None:
    body = (" " * SPACES[mode] + "!").encode()
    told = False
    while True:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/parse", data=body)
        if mode == "backtrack":
            ready(ready_file, "client")
        with urllib.request.urlopen(request) as r:
            json.loads(r.read())
        if not told:
            ready(ready_file, "client")
            told = True


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    me = [sys.executable, __file__]
    kids = [subprocess.Popen([*me, "server", str(port), ready_file])]
    while not os.path.exists(ready_file) or "server" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.05)
    kids.append(subprocess.Popen([*me, "client", str(port), ready_file, mode]))
    for kid in kids:
        kid.wait()


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "server":
        server(int(sys.argv[2]), sys.argv[3])
    elif role == "client":
        client(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        main()
