"""Real jobs whose client waits on a Unix socket server that has not accepted it.

    python accept_jobs.py MODE READY_FILE WORKDIR

The ``shard-router`` listens on WORKDIR/router.sock, starts its ``shard-feeder`` child, and
waits for that child to exit before it serves (a start-up order bug: the serve loop comes after
``Popen.wait()``). The feeder connects and waits for the router's greeting. Each process
appends ``"<pid> <tag>"`` to READY_FILE right before the call it stays in. Modes:

- ``backlog``   the router never calls ``accept()``: the feeder's connection sits in the
                listening socket's accept queue (only sock_diag's pending list shows it).
- ``accepted``  the router accepts the connection first, then waits for the child: the same
                cycle, but over an accepted connection.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def feeder(address: str, ready_file: str) -> None:
    setproctitle.setproctitle("shard-feeder")
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(address)
    ready(ready_file, "feeder")
    conn.recv(64)  # the greeting


def router(mode: str, ready_file: str, workdir: str) -> None:
    setproctitle.setproctitle("shard-router")
    address = os.path.join(workdir, "router.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(address)
    listener.listen(8)
    child = subprocess.Popen([sys.executable, __file__, "feeder", ready_file, address])
    accepted = listener.accept()[0] if mode == "accepted" else None
    ready(ready_file, "router")
    child.wait()
    if accepted is not None:
        accepted.sendall(b"hello")


def main() -> None:
    mode, ready_file, where = sys.argv[1:4]
    if mode == "feeder":
        feeder(where, ready_file)
    else:
        os.makedirs(where, exist_ok=True)
        router(mode, ready_file, where)


if __name__ == "__main__":
    main()
