"""An aiohttp client downloading shards from a FastAPI app under uvicorn (its child), run as
``python aiohttp_pool.py MODE READY_FILE PORT``. Each shard is a 16 MiB streamed body.

- ``gather``  ``asyncio.gather`` of 3 ``session.get`` with ``TCPConnector(limit=2)``, the
              bodies read only after the gather (aiohttp#1623, blind round 30's 03): the first
              two responses keep both connections until their bodies are read, the third get
              waits for a free connection for ever; the server waits to send the rest of two
              bodies nobody reads.
- ``slow``    the twin that reads: one shard at a time, 64 KiB chunks with a short sleep
              between (a client throttling its download): the server also waits for room to
              send, but the client reads on: progressing.

READY_FILE gets ``"<pid> server"`` once the app serves, and ``"<pid> client"`` once the
server has started two responses (gather) or the client has read its first chunks (slow).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

CHUNK = 1 << 20
SHARD = 16 * CHUNK


def ready(tag: str) -> None:
    with open(os.environ["HANGSCOPE_READY"], "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def serve(port: int) -> None:
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app = FastAPI()
    started = 0

    @app.get("/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/shard/{n}")
    async def shard(n: int) -> StreamingResponse:
        nonlocal started
        started += 1
        with open(os.environ["HANGSCOPE_READY"] + ".served", "a") as f:
            f.write(f"{n}\n")

        async def body():  # type: ignore[no-untyped-def]
            block = bytes([n]) * CHUNK
            for _ in range(SHARD // CHUNK):
                yield block

        return StreamingResponse(body(), media_type="application/octet-stream")

    ready("server")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _served(path: str) -> int:
    try:
        with open(path) as f:
            return len(f.read().split())
    except OSError:
        return 0


async def download(mode: str, port: int) -> None:
    import aiohttp

    base = f"http://127.0.0.1:{port}"
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(timeout=timeout,
                                     connector=aiohttp.TCPConnector(limit=2)) as session:
        if mode == "gather":
            async def announce() -> None:  # the job's own marker: two responses started
                served = os.environ["HANGSCOPE_READY"] + ".served"
                while _served(served) < 2:
                    await asyncio.sleep(0.05)
                ready("client")

            marker = asyncio.create_task(announce())
            responses = await asyncio.gather(*(session.get(f"{base}/shard/{n}")
                                               for n in range(3)))
            await marker
            for response in responses:
                await response.read()
            return
        n, said = 0, False
        while True:
            async with session.get(f"{base}/shard/{n % 3}") as response:
                got = 0
                async for chunk in response.content.iter_chunked(64 * 1024):
                    got += len(chunk)
                    if not said and got >= 4 * 64 * 1024:
                        ready("client")
                        said = True
                    await asyncio.sleep(0.02)
            n += 1


def main() -> None:
    mode, ready_file, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ["HANGSCOPE_READY"] = ready_file
    if mode == "serve":
        serve(port)
        return
    server = subprocess.Popen([sys.executable, __file__, "serve", ready_file, str(port)])
    deadline = time.monotonic() + 60
    import urllib.request
    while True:  # the app answers its health check: it serves
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the shard server did not start") from None
            time.sleep(0.05)
    asyncio.run(download(mode, port))


if __name__ == "__main__":
    main()
