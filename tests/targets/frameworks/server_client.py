"""A target of two processes, a server and its client, started by one launcher:

    python TARGET.py MODE READY_FILE WORKDIR

runs ``server(ready_file, port_file)`` in one child, waits for its ``server`` ready line, then
runs ``client(ready_file, port_file, mode)`` in another and waits for both. Each child runs the
same file as ``TARGET.py server|client ...``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def dumps(o: object) -> bytes:
    """A message as JSON bytes (the generic handlers' serializer)."""
    return json.dumps(o).encode()


def run(script: str, server: Callable[[str, str], None],
        client: Callable[[str, str, str], None]) -> None:
    """The launcher, or the child that ``sys.argv`` names."""
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1] == "client":
        client(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    port_file = os.path.join(workdir, "port")
    me = [sys.executable, script]
    kids = [subprocess.Popen([*me, "server", ready_file, port_file])]
    while not os.path.exists(ready_file) or "server" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.05)
    kids.append(subprocess.Popen([*me, "client", ready_file, port_file, mode]))
    for kid in kids:
        kid.wait()
