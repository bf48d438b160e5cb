"""Real Ray Data (``ray.init(num_cpus=2)`` in this driver): a tokenized corpus split into two
streaming shards with ``Dataset.streaming_split(2, equal=True)``, run as
``python ray_data_jobs.py MODE READY_FILE WORKDIR``. Modes:

- ``split_sequential`` the driver checks the shards one after the other (``for shard in
                       shards``): reading split 0 starts an epoch that Ray Data's split
                       coordinator begins only once split 1's consumer reads too, which comes
                       after split 0 ends: never (ray-project/ray#42008, blind round 28's 05;
                       it read "all waiting"). After 30 s the coordinator warns in the log.
- ``split_concurrent`` the twin: a thread per shard reads them at once, epoch after epoch
                       (progressing).
- ``split_early_stop`` two consumer actors read a split each, epoch after epoch; the one
                       of split 0 stops after its first epoch on a rank-local decision
                       (ray-project/ray#62040, blind round 40's 04: an early stop that only
                       rank 0 takes): split 1's consumer waits for an epoch the coordinator
                       starts only once split 0's consumer asks for it too.
- ``split_two_epochs`` the twin: both consumers read the same number of epochs, then the
                       driver reads them again in a loop (progressing).

- ``actor_exits``      a batch job mapped on a fixed pool of one actor
                       (``ActorPoolStrategy(size=1)``) with ``max_errored_blocks = -1``, whose
                       actor exits (``sys.exit(0)``, a
                       text helper's "nothing to do") on one blank document: Ray Data ignores
                       the failed block, and the pool keeps the dead actor's slot and starts no
                       other (ray-project/ray#62746, blind round 42's 06: it read
                       "progressing", its executor's loop going round).
- ``actor_pool``       the twin: the same pipeline with no blank document, run again and again
                       (progressing).

READY_FILE gets ``"<pid> driver"`` once the driver reads split 0 (sequential) or each thread
has read an epoch (concurrent); ``"<pid> consumerN"`` from each consumer actor, and
``"<pid> driver"`` once the driver has consumer 0's result (early stop) or both have read
their epochs once (two epochs); ``"<pid> driver"`` as the driver starts the pipeline (actor
exits) or once it has run it once (actor pool).
"""

from __future__ import annotations

import os
import sys
import threading


def ready(path: str, tag: str = "driver") -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def tokenize(batch):  # type: ignore[no-untyped-def]
    import numpy as np

    ids = [np.frombuffer(t.encode(), dtype=np.uint8).astype(np.int32) % 500
           for t in batch["text"]]
    batch["n_tokens"] = np.array([len(x) for x in ids])
    return batch


def count(shard) -> int:  # type: ignore[no-untyped-def]
    return sum(len(b["n_tokens"]) for b in shard.iter_batches(batch_size=128))


class Consumer:
    """A data-parallel trainer's loop over its split (Ray Train hands each worker one)."""

    def __init__(self, rank: int, ready_file: str) -> None:
        self.rank, self.ready_file = rank, ready_file
        ready(ready_file, f"consumer{rank}")

    def fit(self, shard, epochs: int) -> int:  # type: ignore[no-untyped-def]
        rows = 0
        for epoch in range(epochs):
            rows += count(shard)
            if self.rank == 0 and epoch == 0:
                break  # the bug: "the metric is good enough", decided on rank 0 alone
        return rows


def _consumers(mode: str, ready_file: str, shards) -> None:  # type: ignore[no-untyped-def]
    import ray

    workers = [ray.remote(num_cpus=0)(Consumer).remote(rank, ready_file)  # type: ignore[attr-defined]
               for rank in (0, 1)]
    if mode == "split_early_stop":
        refs = [w.fit.remote(s, 5) for w, s in zip(workers, shards, strict=True)]
        ray.get(refs[0])
        ready(ready_file)
        ray.get(refs[1])  # never returns: split 1's second epoch waits for split 0's
        return
    while True:  # every consumer reads as many epochs as the others: no one waits for long
        ray.get([w.fit.remote(s, 1) for w, s in zip(workers, shards, strict=True)])
        ready(ready_file)


class Embedder:
    """A map actor: each batch's token counts; a blank document ends its process, as the CLI
    helper it calls does ("nothing to do")."""

    def __call__(self, batch):  # type: ignore[no-untyped-def]
        if any(not t.strip() for t in batch["text"]):
            sys.exit(0)
        return tokenize(batch)


def _actor_pool(mode: str, ready_file: str) -> None:
    import ray

    ray.data.DataContext.get_current().max_errored_blocks = -1
    texts = [f"document {i}: " + "lorem ipsum " * (1 + i % 5) for i in range(400)]
    if mode == "actor_exits":
        texts[57] = "   "
        ready(ready_file)
    pool = ray.data.ActorPoolStrategy(size=1)
    while True:
        ds = ray.data.from_items([{"text": t} for t in texts], override_num_blocks=40)
        ds.map_batches(Embedder, batch_size=10, compute=pool).materialize()
        if mode == "actor_pool":
            ready(ready_file)


def main() -> None:
    import ray

    mode, ready_file, _workdir = sys.argv[1:4]
    ray.init(num_cpus=2, include_dashboard=False)
    texts = [f"document {i}: " + "lorem ipsum " * (1 + i % 5) for i in range(2000)]
    ds = ray.data.from_items([{"text": t} for t in texts], override_num_blocks=4)
    if mode in ("actor_exits", "actor_pool"):
        _actor_pool(mode, ready_file)
        return
    shards = ds.map_batches(tokenize, batch_size=250).streaming_split(2, equal=True)
    if mode in ("split_early_stop", "split_two_epochs"):
        _consumers(mode, ready_file, shards)
        return
    if mode == "split_sequential":
        ready(ready_file)
        for shard in shards:  # the bug: split 1 is read only once split 0 is done
            print("rows", count(shard), flush=True)
        return
    epochs = [0, 0]

    def consume(i: int) -> None:
        while True:
            count(shards[i])
            epochs[i] += 1

    for i in (0, 1):
        threading.Thread(target=consume, args=(i,), daemon=True).start()
    while min(epochs) < 2:
        threading.Event().wait(0.2)
    ready(ready_file)
    threading.Event().wait()


if __name__ == "__main__":
    main()
