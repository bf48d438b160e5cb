"""Real jobs whose threads take leases from one pool, some of them a second inside the first.

    python checkout_jobs.py MODE READY_FILE WORKDIR

The ``feature-cache`` process runs a lease pool of 3 (a Condition over a list, as connection
pools are written) and 3 ``refresh-N`` threads. The main thread joins them. It appends
``"<pid> <tag>"`` to READY_FILE once every refresh thread is where it stays. Modes:

- ``nested``  each refresh thread holds a lease (``with pool.lease() as lease:``) and, inside,
              its ``enrich`` step asks for a second one: all 3 leases held, all 3 threads wait
              for a fourth (hung).
- ``slow``    refresh-0 holds its lease in a slow fetch (a sleep) and gives it back after an
              hour; the other two hold one each and wait for a second: a holder still works.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator

import setproctitle


class LeasePool:
    def __init__(self, size: int) -> None:
        self._free = [f"lease-{n}" for n in range(size)]
        self._cond = threading.Condition()
        self.waiting = 0

    @contextlib.contextmanager
    def lease(self) -> Iterator[str]:
        with self._cond:
            self.waiting += 1
            while not self._free:
                self._cond.wait()
            self.waiting -= 1
            lease = self._free.pop()
        try:
            yield lease
        finally:
            with self._cond:
                self._free.append(lease)
                self._cond.notify()


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    setproctitle.setproctitle("feature-cache")
    pool = LeasePool(3)
    taken = threading.Barrier(3)

    def enrich(key: int) -> None:
        with pool.lease():
            print(key)

    def refresh(key: int) -> None:
        with pool.lease():
            taken.wait()  # every lease is out before any asks for a second
            if mode == "slow" and key == 0:
                time.sleep(3600)  # a slow fetch: it gives its lease back after it
            enrich(key)

    threads = [threading.Thread(target=refresh, args=(n,), name=f"refresh-{n}")
               for n in range(3)]
    for thread in threads:
        thread.start()
    want = 3 if mode == "nested" else 2
    while pool.waiting < want:  # every thread that asks for a second waits for it
        time.sleep(0.01)
    with open(ready_file, "a") as f:
        f.write(f"{os.getpid()} cache\n")
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
