"""Real jobs whose batch-prefetch thread dies with an exception.

    python dead_thread_jobs.py MODE READY_FILE

A ``trainer`` process starts a ``prefetch`` thread that reads shards into a list of batches;
its main thread polls that list in a sleep loop before its first step, and a
``metrics-agent`` child waits on a ``multiprocessing.Event`` the trainer sets after that step.
The trainer's stderr goes to the job's log. Each process appends ``"<pid> <tag>"`` to
READY_FILE when it is where it stays. Modes:

- ``died``       the prefetch thread raises on a corrupt shard (KeyError); threading's
                 excepthook prints its traceback to the log and the thread is gone: the
                 trainer polls for ever, the agent waits for ever (hung).
- ``restarted``  the same error, but the trainer starts a new prefetch thread on the same
                 function, which polls the shard directory every second for the next shard
                 (none comes yet) while the trainer polls for batches: a healthy pause, no
                 thread died for good.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator

import setproctitle

BATCHES: list[bytes] = []


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def metrics_agent(first_step: object, ready_file: str) -> None:
    setproctitle.setproctitle("metrics-agent")
    ready(ready_file, "agent")
    first_step.wait()  # type: ignore[attr-defined]


def new_shards(ready_file: str) -> Iterator[dict]:
    """The shards written to the shard directory from now on: none comes in this job."""
    ready(ready_file, "prefetch")
    while True:
        time.sleep(1.0)
        yield from ()


def prefetch(shards: Iterable[dict]) -> None:
    for shard in shards:
        BATCHES.append(shard["tokens"])  # a corrupt shard has no "tokens": KeyError


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    setproctitle.setproctitle("trainer")
    first_step = mp.get_context("fork").Event()
    mp.get_context("fork").Process(target=metrics_agent, args=(first_step, ready_file),
                                   daemon=True).start()
    worker = threading.Thread(target=prefetch, args=([{"path": "shard-0"}],), name="prefetch")
    worker.start()
    worker.join()  # its traceback is in the log now
    if mode == "restarted":
        threading.Thread(target=prefetch, args=(new_shards(ready_file),), name="prefetch-2",
                         daemon=True).start()
    ready(ready_file, "trainer")
    while not BATCHES:  # the batches the dead thread would have made
        time.sleep(0.5)
    first_step.set()


if __name__ == "__main__":
    main()
