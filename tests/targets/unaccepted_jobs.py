"""A server whose loop no longer watches its listening socket: clients queue, nobody accepts.

    python unaccepted_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before the call it stays in; the
server also writes its port to WORKDIR/port. The test (outside the job, as ``curl`` is)
connects to it. Modes:

- ``paused``    (hung) a ``selectors`` server pauses accepting under load (it unregisters its
                listener after two clients, "too many connections, pausing accept") and its
                resume path never runs: later clients' connections wait in the accept queue
                while its loop waits only on its control pipe and the two connections
                (the EMFILE / max-connections pause-accept shape of tornado, aiohttp and
                uvicorn reports: "server stops accepting, port open, curl hangs").
- ``watching``  (healthy) the same server that never pauses: it accepts every client and
                waits for their requests, idle.
- ``client``    (the test's ``curl``, in a session of its own) opens four connections to the
                server of WORKDIR/port, and waits for the answer on the last.
- ``keepalive`` (a healthy client) opens four connections and sleeps, sending nothing.
"""

from __future__ import annotations

import os
import selectors
import socket
import sys
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def serve(ready_file: str, workdir: str, pause_after: int | None) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    control_r, _control_w = os.pipe()
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(control_r, selectors.EVENT_READ, "control")
    with open(os.path.join(workdir, "port.tmp"), "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(os.path.join(workdir, "port.tmp"), os.path.join(workdir, "port"))
    ready(ready_file, "server")
    clients = 0
    while True:
        for key, _ in sel.select():
            if key.data == "accept":
                conn, _ = listener.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, "client")
                clients += 1
                if pause_after is not None and clients >= pause_after:
                    print("too many connections, pausing accept", flush=True)
                    sel.unregister(listener)  # resumed by a timer that was never armed
            elif key.data == "client" and not key.fileobj.recv(4096):
                sel.unregister(key.fileobj)
                key.fileobj.close()


def client(ready_file: str, workdir: str, asks: bool = True) -> None:
    with open(os.path.join(workdir, "port")) as f:
        port = int(f.read())
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    if not asks:
        ready(ready_file, "client")
        time.sleep(3600)
    conns[-1].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    ready(ready_file, "client")
    conns[-1].recv(4096)


if __name__ == "__main__":
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    if mode in ("client", "keepalive"):
        client(ready_file, workdir, asks=mode == "client")
    else:
        serve(ready_file, workdir, 2 if mode == "paused" else None)
