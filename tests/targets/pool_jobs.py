"""A real multiprocessing.Pool whose result handler died.

    python pool_jobs.py MODE READY_FILE WORKDIR

Mode ``unpicklable`` (cpython#103061): a worker raises an exception whose ``__init__`` takes
two arguments but passes one to ``Exception``; it pickles, but unpickling it in the parent
raises, which kills the Pool's ``_handle_results`` thread: ``Pool.map`` never returns while
the workers idle for tasks. The parent appends ``"<pid> parent"`` to READY_FILE once that
thread is gone.
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


def main(ready_file: str) -> None:
    with mp.get_context("fork").Pool(3) as pool:
        threading.Thread(target=watch, args=(ready_file,), daemon=True).start()
        pool.map(extract, range(20), chunksize=1)


if __name__ == "__main__":
    main(sys.argv[2])
