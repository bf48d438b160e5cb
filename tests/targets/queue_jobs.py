"""Real jobs whose processes block putting into full ``multiprocessing.Queue`` s.

    python queue_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE before it blocks (tests/support.py
``settled_job`` then waits until each is asleep in the kernel). Modes, each the mechanism of a
real report (the tests cite it):

- ``paused_full`` a trainer forks 2 data workers that fill a bounded queue (``maxsize=2``),
                  then sleeps for a maintenance window before it drains it: the workers block in
                  ``put`` waiting for it. Healthy: paused.
- ``acks_full``   an async checkpointer puts every shard into a bounded shard queue and reads
                  the writer's acks only after all puts; its writer child puts an ack per shard
                  into a bounded ack queue: with more shards than both queues hold, each blocks
                  putting, waiting for the other to get.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def data_worker(batches: mp.Queue, index: int, ready_file: str) -> None:
    ready(ready_file, f"worker{index}")
    n = 0
    while True:
        batches.put((index, n, bytes(64)))
        n += 1


def ckpt_writer(shards: mp.Queue, acks: mp.Queue, ready_file: str) -> None:
    ready(ready_file, "writer")
    while True:
        name, _ = shards.get()
        acks.put(name)  # the ack queue is full until every shard is queued


def main(mode: str, ready_file: str) -> None:
    ctx = mp.get_context("fork")
    if mode == "paused_full":
        batches = ctx.Queue(maxsize=2)
        for i in range(2):
            ctx.Process(target=data_worker, args=(batches, i, ready_file), daemon=True).start()
        ready(ready_file, "trainer")
        time.sleep(3600)  # the maintenance window
        while True:
            batches.get()
    shards, acks = ctx.Queue(maxsize=2), ctx.Queue(maxsize=2)
    ctx.Process(target=ckpt_writer, args=(shards, acks, ready_file), daemon=True).start()
    ready(ready_file, "saver")
    for i in range(12):
        shards.put((f"shard-{i}", bytes(256)))
    for _ in range(12):
        acks.get()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
