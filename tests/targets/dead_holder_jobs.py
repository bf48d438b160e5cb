"""Real jobs whose forked workers share a ``multiprocessing.Lock`` over a block table.

    python dead_holder_jobs.py MODE READY_FILE WORKDIR

The ``batch-manager`` forks three ``batch-worker`` processes (multiprocessing, fork) that take
one shared lock around a block table, and waits for their results on a Queue. Each process
appends ``"<pid> <tag>"`` to READY_FILE when it is where it stays. Modes:

- ``died``    worker 0 takes the lock and dies inside it (``os._exit(134)``, after logging a
              fatal error): the lock is never released, workers 1 and 2 block on it (hung).
- ``holding`` worker 0 takes the lock and keeps it (a long sleep inside): the lock's holder
              lives.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def worker(index: int, lock: object, taken: object, results: object, mode: str,
           ready_file: str, holder: object, started: object) -> None:
    setproctitle.setproctitle(f"batch-worker-{index}")
    if index == 0:
        with lock:  # type: ignore[attr-defined]
            holder.value = os.getpid()  # type: ignore[attr-defined]
            taken.set()  # type: ignore[attr-defined]
            # Die only once the manager started every worker: each Process.start() reaps the
            # children that already exited, and a reaped holder leaves no zombie to find.
            started.wait()  # type: ignore[attr-defined]
            if mode == "died":
                print("batch-worker-0: fatal: block table corrupt, aborting", flush=True)
                os._exit(134)
            ready(ready_file, "worker0")
            time.sleep(3600)
    taken.wait()  # type: ignore[attr-defined]
    while mode == "died" and _state(holder.value) != "Z":  # type: ignore[attr-defined]
        time.sleep(0.01)  # until the holder is gone: the hang is then complete
    ready(ready_file, f"worker{index}")
    with lock:  # type: ignore[attr-defined]
        results.put(index)  # type: ignore[attr-defined]


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    setproctitle.setproctitle("batch-manager")
    ctx = mp.get_context("fork")
    lock, taken, results, holder = ctx.Lock(), ctx.Event(), ctx.Queue(), ctx.Value("i", 0)
    started = ctx.Event()
    workers = [ctx.Process(target=worker,
                           args=(i, lock, taken, results, mode, ready_file, holder, started))
               for i in range(3)]
    for w in workers:
        w.start()
    started.set()
    ready(ready_file, "manager")
    for _ in workers:
        results.get()


if __name__ == "__main__":
    main()
