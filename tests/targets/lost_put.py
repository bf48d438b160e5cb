"""A parent that farms shards out to two spawned workers over multiprocessing Queues, and
one result that does not pickle (it carries a lock): the worker's QueueFeederThread fails to
send it after put() returned, prints the traceback, and drops it (cpython#84376, #109554);
the parent waits in get() for the last result forever (blind round 29's 07).

    python lost_put.py READY

The parent appends ``"<pid> parent"`` to READY once it has every result but the lost one,
each worker ``"<pid> worker<N>"`` once started.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # what makes it unpicklable


def worker(index: int, tasks: mp.Queue, results: mp.Queue, ready: str) -> None:
    with open(ready, "a") as f:
        f.write(f"{os.getpid()} worker{index}\n")
    while (shard := tasks.get()) is not None:
        result: dict[str, object] = {"shard": shard, "rows": shard * 10}
        if shard == 3:
            result["stats"] = Stats()  # put() returns; the feeder thread fails to send it
        results.put(result)


def main() -> None:
    ready = sys.argv[1]
    ctx = mp.get_context("spawn")
    tasks, results = ctx.Queue(), ctx.Queue()
    workers = [ctx.Process(target=worker, args=(i, tasks, results, ready), name=f"w{i}")
               for i in range(2)]
    for w in workers:
        w.start()
    shards = list(range(6))
    for shard in shards:
        tasks.put(shard)
    got = []
    for done in range(len(shards)):
        if done == len(shards) - 1:
            with open(ready, "a") as f:
                f.write(f"{os.getpid()} parent\n")
        got.append(results.get())  # the last one never comes
    for _ in workers:
        tasks.put(None)


if __name__ == "__main__":
    main()
