"""A front end that forks its engine core and talks to it over pyzmq, the zmq context made at
import time (a module-level ``zmq.Context()`` in a shared utility module):

    python zmq_fork.py MODE READY_FILE WORKDIR

- ``inherited``: the forked engine makes its sockets on the context it inherited: fork copies
  only the calling thread, so the context's I/O threads stayed in the front end; the engine's
  connects are never carried out, its READY stays queued, and it waits for requests on a
  socket with no connection while the front end polls for that READY every 5 s
  (zeromq/pyzmq#1049; blind round 32's 04).
- ``fresh``: the twin: the engine makes a new context after the fork; READY arrives, the
  front end serves its HTTP API and both wait for requests (idle).

The front end appends ``"<pid> frontend"`` to READY_FILE once it polls for READY, the engine
``"<pid> engine"`` once its READY is sent and it waits for requests.
"""

from __future__ import annotations

import http.server
import multiprocessing as mp
import os
import sys

import zmq

CONTEXT = zmq.Context()  # the utility module's shared context, made at import


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def engine_core(mode: str, inbox: str, outbox: str, ready_file: str) -> None:
    ctx = CONTEXT if mode == "inherited" else zmq.Context()
    requests, results = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    requests.connect(inbox)
    results.connect(outbox)
    results.send_pyobj({"status": "READY", "pid": os.getpid()})
    ready(ready_file, "engine")
    while True:
        request = requests.recv_pyobj()
        results.send_pyobj({"id": request["id"], "tokens": [1, 2, 3]})


def front_end(mode: str, ready_file: str, workdir: str) -> None:
    inbox, outbox = f"ipc://{workdir}/input.sock", f"ipc://{workdir}/output.sock"
    requests, results = CONTEXT.socket(zmq.PUSH), CONTEXT.socket(zmq.PULL)
    requests.bind(inbox)
    results.bind(outbox)
    mp.get_context("fork").Process(target=engine_core, args=(mode, inbox, outbox, ready_file),
                                   daemon=True).start()
    poller = zmq.Poller()
    poller.register(results, zmq.POLLIN)
    told = False
    while not poller.poll(5000):  # waiting for the engine core's READY
        if not told:
            ready(ready_file, "frontend")
            told = True
    results.recv_pyobj()
    # serve: its HTTP API takes requests (none come here) and hands each to the engine
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    if not told:
        ready(ready_file, "frontend")
    server.serve_forever()


if __name__ == "__main__":
    os.makedirs(sys.argv[3], exist_ok=True)
    front_end(sys.argv[1], sys.argv[2], sys.argv[3])
