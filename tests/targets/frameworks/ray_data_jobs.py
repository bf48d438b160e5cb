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

READY_FILE gets ``"<pid> driver"`` once the driver reads split 0 (sequential) or each thread
has read an epoch (concurrent).
"""

from __future__ import annotations

import os
import sys
import threading


def ready(path: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} driver\n")


def tokenize(batch):  # type: ignore[no-untyped-def]
    import numpy as np

    ids = [np.frombuffer(t.encode(), dtype=np.uint8).astype(np.int32) % 500
           for t in batch["text"]]
    batch["n_tokens"] = np.array([len(x) for x in ids])
    return batch


def count(shard) -> int:  # type: ignore[no-untyped-def]
    return sum(len(b["n_tokens"]) for b in shard.iter_batches(batch_size=128))


def main() -> None:
    import ray

    mode, ready_file, _workdir = sys.argv[1:4]
    ray.init(num_cpus=2, include_dashboard=False)
    texts = [f"document {i}: " + "lorem ipsum " * (1 + i % 5) for i in range(2000)]
    ds = ray.data.from_items([{"text": t} for t in texts], override_num_blocks=4)
    shards = ds.map_batches(tokenize, batch_size=250).streaming_split(2, equal=True)
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
