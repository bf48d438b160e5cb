"""Real gloo jobs whose workers set their own rank in ``os.environ`` after they started.

    python env_rank_jobs.py MODE READY_FILE WORKDIR

The launcher forks 3 ``multiprocessing`` workers with no rank in their environment; each sets
``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``MASTER_*`` in ``os.environ`` itself (as
``mp.spawn`` jobs do), its rank the reverse of its start order (the first started is rank 2),
and joins a gloo group through ``env://``. /proc/PID/environ shows none of it: only the live
environment does. Each worker appends ``"<pid> rank<N>"`` to READY_FILE before its last call.
Modes:

- ``mismatch``  rank 1 calls broadcast while ranks 0 and 2 call all_reduce (hung).
- ``steady``    every rank all_reduces in a loop, a short sleep per step (healthy).
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from hang_shapes import free_port, ready

WORLD = 3


def worker(index: int, port: int, mode: str, ready_file: str) -> None:
    rank = WORLD - 1 - index
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    value = torch.ones(2)
    dist.all_reduce(value)  # everyone joined
    ready(ready_file, f"rank{rank}")
    if mode == "steady":
        while True:
            dist.all_reduce(value)
            time.sleep(0.01)
    if rank == 1:
        dist.broadcast(value, src=0)
    else:
        dist.all_reduce(value)


def fork_ranks(target: Callable[..., None], ready_file: str, *args: object) -> list[Any]:
    """Fork WORLD ranks running ``target(index, *args)``; then the launcher is ready."""
    context = mp.get_context("fork")
    ranks = [context.Process(target=target, args=(i, *args)) for i in range(WORLD)]
    for proc in ranks:
        proc.start()
    ready(ready_file, "launcher")
    return ranks


def launch(mode: str, ready_file: str) -> None:
    workers = fork_ranks(worker, ready_file, free_port(), mode, ready_file)
    while workers:  # the test kills the job: no worker returns
        workers.pop().join()


if __name__ == "__main__":
    launch(*sys.argv[1:3])
