"""Real jobs whose worker waits for a signal its supervisor sent.

    python signal_jobs.py MODE READY_FILE WORKDIR

The ``ingest-supervisor`` starts an ``ingest-worker`` child that waits on a ``threading.Event``
its SIGTERM handler sets (a graceful stop); once the worker is ready the supervisor calls
``terminate()`` and waits for it to exit. Each process appends ``"<pid> <tag>"`` to
READY_FILE where it stays. Modes:

- ``masked``   the worker blocks SIGTERM with ``signal.pthread_sigmask`` before it starts its
               heartbeat thread (which inherits the mask): SIGTERM stays pending (hung).
- ``ignored``  the worker sets SIGTERM to ``SIG_IGN``: terminate() does nothing (hung).
- ``unsent``   the worker blocks SIGTERM, but the supervisor never sends it and waits: no
               signal is pending.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def worker(mode: str, ready_file: str) -> None:
    setproctitle.setproctitle("ingest-worker")
    stop = threading.Event()
    if mode == "ignored":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    threading.Thread(target=stop.wait, name="heartbeat", daemon=True).start()
    ready(ready_file, "worker")
    stop.wait()


def supervisor(mode: str, ready_file: str) -> None:
    setproctitle.setproctitle("ingest-supervisor")
    child = subprocess.Popen([sys.executable, __file__, "worker", ready_file, mode])
    while not (Path(ready_file).exists() and "worker" in Path(ready_file).read_text().split()):
        time.sleep(0.02)
    if mode != "unsent":
        child.terminate()
    ready(ready_file, "supervisor")
    child.wait()


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(sys.argv[3], sys.argv[2])
    else:
        open(sys.argv[2], "a").close()
        supervisor(sys.argv[1], sys.argv[2])
