"""A FastAPI endpoint that streams tokens a generation thread puts on a queue (the shape of
transformers' ``TextIteratorStreamer``), and a client reading the stream:

    python stream_producer.py MODE READY_FILE WORKDIR

The response's sync iterator runs on AnyIO's worker thread (Starlette's
``iterate_in_threadpool``), each ``next()`` a ``queue.Queue.get()``.

- ``died``: the generation thread raises before it puts anything (a sampling parameter it
  rejects: transformers PR #22576): the iterator waits on the queue for ever, the response's
  headers sent, its body never ending. Hung.
- ``slow``: the thread puts a token every 0.2 s for ever. Progressing.

READY_FILE gets ``"<pid> server"`` once it serves and ``"<pid> client"`` once the response's
headers came (died) or its first token (slow).
"""

# (no `from __future__ import annotations`: FastAPI reads the endpoint's types at run time)
import queue
import threading
import time
import urllib.request

from server_pair import ready, run


class Streamer:
    """Tokens from a generation thread, one ``next()`` each (its queue's ``get``)."""

    def __init__(self) -> None:
        self.tokens: queue.Queue[str | None] = queue.Queue()

    def __iter__(self) -> "Streamer":
        return self

    def __next__(self) -> str:
        token = self.tokens.get()
        if token is None:
            raise StopIteration
        return token


def generate(streamer: Streamer, mode: str) -> None:
    if mode == "died":
        raise ValueError("`penalty` has to be a strictly positive float, but is 0.0")
    n = 0
    while True:
        time.sleep(0.2)
        streamer.tokens.put(f"token{n} ")
        n += 1


def server(port: int, ready_file: str, mode: str) -> None:
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app = FastAPI()

    @app.post("/stream")
    def stream() -> StreamingResponse:
        streamer = Streamer()
        threading.Thread(target=generate, args=(streamer, mode), name="generate",
                         daemon=True).start()
        return StreamingResponse(iter(streamer), media_type="text/plain")

    @app.on_event("startup")
    async def up() -> None:
        ready(ready_file, "server")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio")


def client(port: int, ready_file: str, _mode: str) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/stream", data=b"{}")
    with urllib.request.urlopen(request) as response:
        ready(ready_file, "client")  # the headers came; the body follows token by token
        while response.read(1):
            pass


if __name__ == "__main__":
    run(__file__, server, client)
