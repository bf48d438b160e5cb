"""A sync worker that uploads signed event batches to a FastAPI ingest API (uvicorn), both in
the job (the worker starts the API):

    python ingest_jobs.py MODE READY_FILE WORKDIR

The API checks each POST's HMAC in a pure ASGI middleware that reads the whole body first.

- ``drained``: the middleware hands the app the ``receive`` it drained: FastAPI's body parsing
  waits for more body, which never comes; the worker's POST waits for its reply for ever, both
  event loops idle (Kludex/starlette#495, #847; blind round 32's 08).
- ``replayed``: the twin: the middleware replays the body it read to the app; the worker
  uploads a batch every 0.2 s (healthy).

The worker appends ``"<pid> worker"`` to READY_FILE once its first POST is sent (``drained``)
or answered (``replayed``), the API ``"<pid> api"`` once it serves.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys

from pydantic import BaseModel

SECRET = b"dev-secret"


class Batch(BaseModel):
    """A batch of events (module level: FastAPI resolves the annotation by name)."""

    source: str
    events: list[dict]


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


class Signed:
    """Rejects a POST whose X-Signature is not the HMAC of its raw body."""

    def __init__(self, app, replay: bool) -> None:  # type: ignore[no-untyped-def]
        self.app, self.replay = app, replay

    async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        signature = dict(scope["headers"]).get(b"x-signature", b"").decode()
        if not hmac.compare_digest(signature, hmac.new(SECRET, body, hashlib.sha256).hexdigest()):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            return await send({"type": "http.response.body", "body": b""})
        if self.replay:
            async def again():  # type: ignore[no-untyped-def]
                return {"type": "http.request", "body": body, "more_body": False}
            return await self.app(scope, again, send)
        return await self.app(scope, receive, send)


def api(port: int, ready_file: str, replay: bool) -> None:
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()
    stored: list[dict] = []

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"ok": True}

    @app.post("/ingest")
    async def ingest(batch: Batch) -> dict:
        stored.extend(batch.events)
        return {"stored": len(stored)}

    @app.on_event("startup")
    async def up() -> None:
        ready(ready_file, "api")

    uvicorn.run(Signed(app, replay), host="127.0.0.1", port=port, log_level="warning")


async def worker(mode: str, ready_file: str) -> None:
    import aiohttp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.Popen([sys.executable, __file__, "api", ready_file, str(port), mode])
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        while True:  # until the API answers its health check
            try:
                async with session.get(base + "/healthz") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
        told = False
        for i in range(1 << 30):
            await asyncio.sleep(0.2)  # the next batch from the event source
            body = json.dumps({"source": "clicks", "events": [{"n": i}] * 100}).encode()
            headers = {"content-type": "application/json",
                       "x-signature": hmac.new(SECRET, body, hashlib.sha256).hexdigest()}
            if mode == "drained" and not told:
                loop = asyncio.get_running_loop()
                loop.call_later(0.5, ready, ready_file, "worker")  # its POST went out
                told = True
            async with session.post(base + "/ingest", data=body, headers=headers) as r:
                await r.read()
            if not told:
                ready(ready_file, "worker")
                told = True


if __name__ == "__main__":
    if sys.argv[1] == "api":
        api(int(sys.argv[3]), sys.argv[2], sys.argv[4] == "replayed")
    else:
        asyncio.run(worker(sys.argv[1], sys.argv[2]))
