"""Real process pools that never return a result.

    python pool_jobs.py MODE READY_FILE WORKDIR

Modes, each the mechanism of a real report (the tests cite it); each process appends
``"<pid> <tag>"`` to READY_FILE where it stays:

- ``unpicklable`` (cpython#103061): a worker raises an exception whose ``__init__`` takes two
  arguments but passes one to ``Exception``; it pickles, but unpickling it in the parent
  raises, which kills the Pool's ``_handle_results`` thread: ``Pool.map`` never returns while
  the workers idle for tasks (tag ``parent`` once that thread is gone).
- ``starved`` (OpenImageIO#1560's shape): a ``ProcessPoolExecutor(max_workers=2)`` is given 2
  tasks that wait on a Manager ``Event``, then the task that sets it, which never gets a
  worker; the driver waits for the futures.
- ``imap_feed`` (python/cpython#84291; blind round 40's 05): the iterable given to
  ``Pool.imap`` is a generator that loads each shard with ``pool.apply`` on the same pool;
  imap consumes its iterable in the Pool's task-handler thread, which then waits for a task
  only it would hand to a worker (tag ``parent`` once that thread is in its wait).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import time


class RecordError(Exception):
    def __init__(self, field: str, record: int) -> None:
        super().__init__(f"record {record} has no {field}")
        self.field, self.record = field, record


def extract(record: int) -> int:
    if record == 7:
        raise RecordError("lang", record)
    return record * 2


def watch(ready_file: str) -> None:
    while any(t.name.endswith("(_handle_results)") or "_handle_results" in repr(t)
              for t in threading.enumerate()):
        time.sleep(0.05)
    with open(ready_file, "a") as f:
        f.write(f"{os.getpid()} parent\n")


def wait_for_weights(event: object, index: int, ready_file: str) -> int:
    with open(ready_file, "a") as f:
        f.write(f"{os.getpid()} worker{index}\n")
    event.wait()  # type: ignore[attr-defined]
    return index


def publish_weights(event: object) -> None:
    event.set()  # type: ignore[attr-defined]


def starved(ready_file: str) -> None:
    import concurrent.futures as cf

    ctx = mp.get_context("fork")
    with ctx.Manager() as manager, cf.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        event = manager.Event()
        futures = [pool.submit(wait_for_weights, event, i, ready_file) for i in range(2)]
        futures.append(pool.submit(publish_weights, event))
        with open(ready_file, "a") as f:
            f.write(f"{os.getpid()} driver\n")
        cf.wait(futures)


def load_shard(shard: int) -> list[int]:
    return list(range(shard * 4, shard * 4 + 4))


def double(record: int) -> int:
    return record * 2


def imap_feed(ready_file: str) -> None:
    with mp.get_context("fork").Pool(2) as pool:
        def records():  # type: ignore[no-untyped-def]
            for shard in range(3):
                with open(ready_file, "a") as f:  # in the task handler: it waits next
                    f.write(f"{os.getpid()} parent\n")
                yield from pool.apply(load_shard, (shard,))  # the bug: the same pool

        for _ in pool.imap(double, records()):
            pass


def main(mode: str, ready_file: str) -> None:
    if mode == "starved":
        starved(ready_file)
        return
    if mode == "imap_feed":
        imap_feed(ready_file)
        return
    with mp.get_context("fork").Pool(3) as pool:
        threading.Thread(target=watch, args=(ready_file,), daemon=True).start()
        pool.map(extract, range(20), chunksize=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
