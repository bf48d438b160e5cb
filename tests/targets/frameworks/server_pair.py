"""A target of two processes, a server and its client, started by one launcher (the PID a user
picks): ``python JOB.py MODE READY_FILE WORKDIR`` runs :func:`launch`, which starts
``JOB.py server PORT READY_FILE MODE`` and, once the server wrote ``"<pid> server"`` to
READY_FILE, ``JOB.py client PORT READY_FILE MODE``, and waits for both. Imported by the targets
beside it (their directory is on ``sys.path`` when they run as scripts)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def launch(script: str) -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    me = [sys.executable, script]
    kids = [subprocess.Popen([*me, "server", str(port), ready_file, mode])]
    # (the launcher's poll of the server's ready line: a target's own handshake, no test's)
    while not os.path.exists(ready_file) or "server" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.05)
    kids.append(subprocess.Popen([*me, "client", str(port), ready_file, mode]))
    for kid in kids:
        kid.wait()


def run(script: str, server: Callable[[int, str, str], None],
        client: Callable[[int, str, str], None]) -> None:
    """The script's entry: its server, its client, or the launcher of both."""
    role = sys.argv[1]
    if role == "server":
        server(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif role == "client":
        client(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        launch(script)
