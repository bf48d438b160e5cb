"""ASGI and HTTP servers (uvicorn, aiohttp, tornado, gunicorn): the event loop of a server
that waits for its next request sits in ``selectors`` under the framework's serve loop; a
Starlette/FastAPI app runs its sync endpoints on AnyIO's worker threads, which wait for the next
one in their pool's loop."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(
    name="uvicorn",
    server_loop_files=("uvicorn/", "aiohttp/", "tornado/", "gunicorn/"),
    pool_workers=(("WorkerThread.run", "anyio/_backends/_asyncio.py"),),
    # uvicorn runs the app's lifespan up to its ``yield`` before it binds its socket: until
    # then nothing listens (uvicorn#2751).
    startup_lines=("Waiting for application startup.", "Application startup complete."),
    # On SIGTERM uvicorn closes its listener, then waits, with no deadline unless
    # --timeout-graceful-shutdown is set, for every open response to end: a stream that never
    # ends (server-sent events) keeps the process alive (uvicorn#451).
    drain_lines=("Waiting for connections to close.", "Finished server process"),
)
