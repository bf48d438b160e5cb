"""ASGI and HTTP servers (uvicorn, aiohttp, tornado, gunicorn): the event loop of a server
that waits for its next request sits in ``selectors`` under the framework's serve loop; a
Starlette/FastAPI app runs its sync endpoints on AnyIO's worker threads, which wait for the next
one in their pool's loop."""

from __future__ import annotations

from hangscope.frameworks import Framework

#: Why a worker a server forked while it served keeps running after terminate(): uvicorn
#: installs its SIGTERM handler for as long as it serves (Server.capture_signals), and a child
#: forked then inherits it, which only sets a flag in the child's copy of the server
#: (Kludex/uvicorn#2289; gunicorn's workers alike).
INHERITED_SIGTERM = ("a handler inherited through fork from a parent that catches SIGTERM "
                     "while it serves (uvicorn's, gunicorn's) only sets a flag in the child's "
                     "copy of the parent")

FRAMEWORK = Framework(
    name="uvicorn",
    server_loop_files=("uvicorn/", "aiohttp/", "tornado/", "gunicorn/"),
    pool_workers=(("WorkerThread.run", "anyio/_backends/_asyncio.py"),),
    # ``--workers N``: each worker answers its supervisor's health pings on a thread of its
    # own (uvicorn/supervisors/multiprocess.py ``Process.always_pong``), whatever its main
    # thread does: liveness, not the work.
    helper_targets=("always_pong",),
    # uvicorn runs the app's lifespan up to its ``yield`` before it binds its socket: until
    # then nothing listens (uvicorn#2751).
    startup_lines=("Waiting for application startup.", "Application startup complete."),
    # On SIGTERM uvicorn closes its listener, then waits, with no deadline unless
    # --timeout-graceful-shutdown is set, for every open response to end: a stream that never
    # ends (server-sent events) keeps the process alive (uvicorn#451).
    drain_lines=("Waiting for connections to close.", "Finished server process"),
)
