"""Real jobs whose indexer polls whether a server it needs is still alive.

    python zombie_wait_jobs.py MODE READY_FILE WORKDIR

The ``index-launcher`` starts a ``cache-server`` and an ``indexer`` (both its children) and
waits for the indexer (``Popen.wait``). The indexer logs ``indexer: waiting for cache server
PID N to drain`` and polls ``os.kill(N, 0)`` every 0.2 s until it fails. Output goes to the
job's log. Each process appends ``"<pid> <tag>"`` to READY_FILE when it is where it stays.
Modes:

- ``zombie`` the server exits at once: a zombie its parent never reaps (it waits for the
             indexer first), which ``kill(pid, 0)`` still finds: the poll never ends (hung).
- ``alive``  the server keeps running (it sleeps): the indexer waits for a live server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import setproctitle

SERVER = "import setproctitle, time, sys; setproctitle.setproctitle('cache-server'); " \
         "sys.exit(0) if sys.argv[1] == 'zombie' else time.sleep(3600)"


def indexer(server: int, ready_file: str) -> None:
    setproctitle.setproctitle("indexer")
    print(f"indexer: waiting for cache server PID {server} to drain", flush=True)
    with open(ready_file, "a") as f:
        f.write(f"{os.getpid()} indexer\n")
    while True:
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 4:
        indexer(int(sys.argv[4]), ready_file)
        return
    setproctitle.setproctitle("index-launcher")
    server = subprocess.Popen([sys.executable, "-c", SERVER, mode])
    if mode == "zombie":
        os.waitid(os.P_PID, server.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    child = subprocess.Popen([sys.executable, __file__, mode, ready_file, sys.argv[3],
                              str(server.pid)])
    with open(ready_file, "a") as f:
        f.write(f"{os.getpid()} launcher\n")
    child.wait()


if __name__ == "__main__":
    main()
