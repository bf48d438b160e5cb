"""Two threads of one name in different places: one sleeps, one waits on a lock held forever.

    python named_threads.py READY_FILE WORKDIR

A pool that names every thread alike (``worker``) is common; the TUI's thread list must tell
them apart. Appends ``"<tid> worker"`` for each thread, then ``"<pid> main"``, to READY_FILE.
"""

from __future__ import annotations

import os
import sys
import threading
import time


def main(ready_file: str) -> None:
    held = threading.Lock()
    held.acquire()  # never released: the second worker waits on it for good
    started = threading.Barrier(3)

    def sleeper() -> None:
        started.wait()
        time.sleep(3600)

    def locked() -> None:
        started.wait()
        held.acquire()

    threads = [threading.Thread(target=f, name="worker", daemon=True) for f in (sleeper, locked)]
    for thread in threads:
        thread.start()
    started.wait()
    with open(ready_file, "a") as f:
        for thread in threads:
            f.write(f"{thread.native_id} worker\n")
        f.write(f"{os.getpid()} main\n")
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main(sys.argv[1])
