"""A supervisor that keeps three replicas up, whose replicas die as they start.

    python restart_jobs.py MODE READY_FILE WORKDIR

A ``replica-supervisor`` process starts three ``replica`` children (``python
restart_jobs.py child``) and starts a new one whenever one exits (``os.wait``), as a process
manager does. Each child starts up (0.3 s), loads its config and dies: the config has no "shard" key
(KeyError), its traceback on the shared stderr. The supervisor appends ``"<pid> supervisor"``
to READY_FILE once it has restarted six children, 2 s or more after it started. Mode
``crashing``: a crash loop, no process stuck for long, the job never up (hung).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import setproctitle


def load_config(path: str) -> int:
    with open(path) as f:
        return json.load(f)["shard"]


def child(workdir: str) -> None:
    setproctitle.setproctitle("replica")
    # A replica's start-up (imports, a port) before it reads its config: each lives a
    # moment, so the supervisor has its three children at any time, as a real one does.
    time.sleep(0.3)
    load_config(os.path.join(workdir, "replica.json"))


def supervise(ready_file: str, workdir: str) -> None:
    setproctitle.setproctitle("replica-supervisor")
    with open(os.path.join(workdir, "replica.json"), "w") as f:
        json.dump({"model": "tiny"}, f)
    argv = [sys.executable, os.path.abspath(__file__), "child", workdir]
    started = time.monotonic()
    replicas = {subprocess.Popen(argv).pid for _ in range(3)}
    restarts = 0
    told = False
    while True:
        pid, _ = os.wait()
        replicas.discard(pid)
        replicas.add(subprocess.Popen(argv).pid)
        restarts += 1
        # The loop's steady state: six restarts, and past the first seconds, so the replicas
        # alive now are replacements (on a loaded machine a replica's start alone takes 1 s)
        if restarts >= 6 and time.monotonic() - started > 2.0 and not told:
            told = True
            with open(ready_file, "a") as f:
                f.write(f"{os.getpid()} supervisor\n")


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        supervise(sys.argv[2], sys.argv[3])
