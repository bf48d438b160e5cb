"""ASGI and HTTP servers (uvicorn, aiohttp, tornado, gunicorn): the event loop of a server
that waits for its next request sits in ``selectors`` under the framework's serve loop."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(
    name="uvicorn",
    server_loop_files=("uvicorn/", "aiohttp/", "tornado/", "gunicorn/"),
)
