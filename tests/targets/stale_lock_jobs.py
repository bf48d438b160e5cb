"""Real jobs whose workers poll for a lock file (``O_CREAT|O_EXCL``) that names its holder.

    python stale_lock_jobs.py MODE READY_FILE WORKDIR

The ``index-builder`` starts a ``compactor`` that takes WORKDIR/index.lock (its PID in it),
then two ``segment-writer`` processes that try to take it every 0.2 s and log
``index lock busy (held by pid N), waiting`` now and then. Output goes to the job's log. Each
process appends ``"<pid> <tag>"`` to READY_FILE when it is where it stays. Modes:

- ``crashed`` the compactor is killed (SIGKILL) while it holds the lock: the lock file stays,
              its holder is gone, and the writers poll for ever (hung).
- ``holding`` the compactor lives on, holding the lock for a long compaction: the writers
              wait for a live holder (not stale).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def take(lock: str) -> bool:
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    return True


def _written(lock: str) -> bool:
    try:
        with open(lock) as f:
            return bool(f.read().strip())
    except FileNotFoundError:
        return False


def writer(index: int, lock: str, ready_file: str) -> None:
    setproctitle.setproctitle(f"segment-writer[{index}]")
    attempt = 0
    while not take(lock):
        if attempt % 20 == 0:
            with open(lock) as f:
                owner = f.read().strip()
            print(f"segment-writer[{index}]: index lock busy (held by pid {owner}), waiting",
                  flush=True)
        if attempt == 0:
            ready(ready_file, f"writer{index}")
        attempt += 1
        time.sleep(0.2)


def main() -> None:
    mode, ready_file, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    setproctitle.setproctitle("index-builder")
    lock = os.path.join(workdir, "index.lock")
    holder = os.fork()
    if holder == 0:
        setproctitle.setproctitle("compactor")
        take(lock)
        while True:
            time.sleep(3600)
    while not _written(lock):
        time.sleep(0.01)
    if mode == "crashed":
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)
        print(f"index-builder: compactor {holder} died (SIGKILL)", flush=True)
    kids = []
    for index in range(2):
        pid = os.fork()
        if pid == 0:
            writer(index, lock, ready_file)
            os._exit(0)
        kids.append(pid)
    ready(ready_file, "builder")
    for pid in kids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
