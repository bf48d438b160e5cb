"""An app module that builds its index at import time on a ``ProcessPoolExecutor`` whose task
is a function of this module (python/cpython#155890, blind round 41's 04), served by
``uvicorn_workers.py READY_FILE PORT import_pool``.

uvicorn's worker imports this module from its event loop (``Config.load``); the main thread
holds the module's import lock while it waits for the pool's results, and the pool's
``QueueFeederThread`` must pickle ``_tokenize`` by reference, which imports this module: it
waits for that lock for ever, and the pool's process never gets a task. The worker's
``always_pong`` thread still answers the supervisor's pings, so uvicorn keeps it. Each worker
appends ``"<pid> building"`` to READY_FILE just before the map.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor


def _tokenize(docs: list[str]) -> list[int]:
    return [len(d.split()) for d in docs]


def _build_index() -> list[int]:
    shards = [[f"document {i} {j}" for j in range(50)] for i in range(4)]
    with open(os.environ["HANGSCOPE_READY"], "a") as f:
        f.write(f"{os.getpid()} building\n")
    with ProcessPoolExecutor(max_workers=1) as pool:
        return [n for shard in pool.map(_tokenize, shards) for n in shard]


INDEX = _build_index()


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
