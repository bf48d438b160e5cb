"""An alert hub served by aiohttp's ``web.run_app`` with two WebSocket subscribers, all idle
between alerts:

    python aiohttp_ws.py MODE READY_FILE WORKDIR

- ``idle``: the hub waits for alerts to publish, the subscribers for alerts to show (healthy:
  blind round 33's 02 read "a reply that never comes": ``run_app`` runs the server's loop in
  ``run_until_complete``, which was taken for a program's call awaiting a result).

READY_FILE gets ``"<pid> hub"`` once it serves and ``"<pid> subscriber<N>"`` once each is
connected.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import socket
import sys


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def hub(port: int, ready_file: str) -> None:
    from aiohttp import web

    subscribers: set[web.WebSocketResponse] = set()

    async def subscribe(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=30.0)
        await ws.prepare(request)
        subscribers.add(ws)
        try:
            async for _msg in ws:
                pass
        finally:
            subscribers.discard(ws)
        return ws

    async def publish(request: web.Request) -> web.Response:
        alert = await request.text()
        await asyncio.gather(*(ws.send_str(alert) for ws in list(subscribers)))
        return web.json_response({"delivered": len(subscribers)})

    async def announce(_app: web.Application) -> None:
        ready(ready_file, "hub")

    app = web.Application()
    app.add_routes([web.get("/ws", subscribe), web.post("/alerts", publish)])
    app.on_startup.append(announce)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


def subscriber(index: int, port: int, ready_file: str) -> None:
    import aiohttp

    async def follow() -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    ws = await session.ws_connect(f"http://127.0.0.1:{port}/ws", heartbeat=30.0)
                    break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.1)
            ready(ready_file, f"subscriber{index}")
            async for msg in ws:
                print("alert", msg.data, flush=True)

    asyncio.run(follow())


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [mp.Process(target=hub, args=(port, sys.argv[2]))]
    procs += [mp.Process(target=subscriber, args=(i, port, sys.argv[2])) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
