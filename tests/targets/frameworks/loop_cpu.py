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
import re
import urllib.request

from server_pair import ready, run

SPACES = {"backtrack": 40, "steady": 20}


def server(port: int, ready_file: str, _mode: str) -> None:
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


if __name__ == "__main__":
    run(__file__, server, client)
