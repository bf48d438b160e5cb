"""A real uvicorn server with workers: ``uvicorn uvicorn_workers:app --workers 2`` run as
``python uvicorn_workers.py READY_FILE PORT [import_pool]`` (``import_pool``: the app of
uvicorn_import_pool.py, whose import never returns).

uvicorn's master opens the listening socket, starts the workers (spawn) that accept on it,
and then waits in its supervisor loop, pinging each worker over a pipe every half second (a
few bytes each way). Each worker appends ``"<pid> worker"`` to READY_FILE from its startup
hook. Nobody sends a request: the server is idle (blind round 23's 07, uvicorn#2668, read
"progressing" from the master's pings).
"""

from __future__ import annotations

import os
import sys


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    """A minimal ASGI app: its lifespan startup says the worker is ready; requests get 200."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                with open(os.environ["HANGSCOPE_READY"], "a") as f:
                    f.write(f"{os.getpid()} worker\n")
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def main() -> None:
    ready_file, port = sys.argv[1:3]
    module = "uvicorn_import_pool" if sys.argv[3:] == ["import_pool"] else "uvicorn_workers"
    os.environ["HANGSCOPE_READY"] = ready_file
    here = os.path.dirname(os.path.abspath(__file__))
    os.chdir(here)
    os.execvp(sys.executable, [sys.executable, "-m", "uvicorn", f"{module}:app",
                               "--workers", "2", "--port", port, "--log-level", "warning"])


if __name__ == "__main__":
    main()
