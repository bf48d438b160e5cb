"""A real job whose thread upgrades a shared lock to an exclusive one it cannot get.

    python rwlock_jobs.py MODE READY_FILE WORKDIR

Mode ``upgrade`` (Waggle-mcp#67's shape, a readers/writer lock built on a Condition): a
feature-store service's 6 request threads look tokens up under ``acquire_shared()``; on a
miss, thread ``lookup-2`` refreshes the entry with ``acquire_exclusive()`` while still
holding its shared lock, and waits for every reader to leave, itself included. The lock
prefers writers, so the other request threads queue behind it. The main thread joins them.
The process appends ``"<pid> <tag>"`` to READY_FILE once every thread is waiting.
"""

from __future__ import annotations

import os
import sys
import threading

import setproctitle


class SharedLock:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    def acquire_shared(self) -> None:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1

    def release_shared(self) -> None:
        with self._cond:
            self._shared -= 1
            self._cond.notify_all()

    def acquire_exclusive(self) -> None:
        with self._cond:
            self._waiting += 1
            while self._exclusive or self._shared:
                self._cond.wait()
            self._waiting -= 1
            self._exclusive = True

    def release_exclusive(self) -> None:
        with self._cond:
            self._exclusive = False
            self._cond.notify_all()


class FeatureStore:
    def __init__(self) -> None:
        self.guard = SharedLock()
        self.rows: dict[str, int] = {"warm": 1}
        self.upgrading = threading.Event()

    def lookup(self, key: str) -> int:
        self.guard.acquire_shared()
        try:
            if key not in self.rows:
                return self._refresh(key)
            return self.rows[key]
        finally:
            self.guard.release_shared()

    def _refresh(self, key: str) -> int:
        self.upgrading.set()
        self.guard.acquire_exclusive()
        try:
            self.rows[key] = len(self.rows)
            return self.rows[key]
        finally:
            self.guard.release_exclusive()


def main(ready_file: str) -> None:
    setproctitle.setproctitle("feature-store")
    store = FeatureStore()
    started = threading.Barrier(7)

    def request(index: int) -> None:
        started.wait()
        if index == 2:
            store.lookup("cold")  # a miss: the upgrade
        store.upgrading.wait()
        while True:
            store.lookup("warm")

    threads = [threading.Thread(target=request, args=(i,), name=f"lookup-{i}")
               for i in range(6)]
    for t in threads:
        t.start()
    started.wait()
    store.upgrading.wait()
    with open(ready_file, "a") as f:
        f.write(f"{os.getpid()} store\n")
    for t in threads:
        t.join()


if __name__ == "__main__":
    main(sys.argv[2])
