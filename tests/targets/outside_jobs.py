"""Jobs whose wait leads to a process outside their tree (tests/integration/test_outside_peers.py).

The outside process is started by the test itself, in a session of its own (a sidecar, a local
service), so no walk of the job's tree finds it.

    python outside_jobs.py holder LOCKFILE READY MODE    # the outside side of a file lock
    python outside_jobs.py lock_job LOCKFILE READY        # polls a filelock on LOCKFILE
    python outside_jobs.py service PORT READY MODE        # the outside side of a connection
    python outside_jobs.py tcp_job PORT READY             # asks the service, one call a loop

holder MODE: ``keep`` takes the lock and never lets it go (a sidecar retrying an upload with
the lock held); ``share`` takes it for 50 ms every 200 ms (a healthy neighbour).
service MODE: ``backlog`` listens and never accepts (the kernel completes the handshakes);
``silent`` accepts and never answers; ``answer`` answers every request.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path


def _ready(path: str, tag: str) -> None:
    import os
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def holder(lock_file: str, ready: str, mode: str) -> None:
    from filelock import FileLock
    lock = FileLock(lock_file)
    if mode == "keep":
        with lock:
            _ready(ready, "holder")
            while True:  # an upload that fails, retried with the lock held
                time.sleep(0.5)
    _ready(ready, "holder")
    while True:
        with lock:
            time.sleep(0.05)
        time.sleep(0.2)


def lock_job(lock_file: str, ready: str) -> None:
    from filelock import FileLock
    lock = FileLock(lock_file)
    _ready(ready, "job")
    step = 0
    while True:
        with lock:  # save a checkpoint under the lock
            step += 1
            Path(lock_file + ".step").write_text(str(step))
        sum(i * i for i in range(200_000))  # a training step's work


def service(port: str, ready: str, mode: str) -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(port)))
    srv.listen(16)
    _ready(ready, "service")
    if mode == "backlog":
        while True:
            time.sleep(3600)
    held = []
    while True:
        conn, _ = srv.accept()
        if mode == "silent":
            held.append(conn)  # accepted, read nothing, answer never
            continue
        while data := conn.recv(64):
            conn.sendall(data)
        conn.close()


def tcp_job(port: str, ready: str) -> None:
    conn = socket.create_connection(("127.0.0.1", int(port)))
    _ready(ready, "job")
    while True:
        conn.sendall(b"ping")
        if not conn.recv(64):  # blocks until the service answers
            return
        sum(i * i for i in range(100_000))


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    {"holder": holder, "lock_job": lock_job, "service": service, "tcp_job": tcp_job}[role](*args)
