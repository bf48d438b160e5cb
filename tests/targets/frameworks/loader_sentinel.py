"""Training on records a decoder process puts on a ``multiprocessing.Queue``, read by a real
DataLoader over an ``IterableDataset`` with two workers, each taking records until it takes
the end-of-stream marker (``None``):

    python loader_sentinel.py MODE READY_FILE WORKDIR

- ``one_sentinel``: the decoder puts one marker, as for one reader, and exits: the worker
  that takes it ends; the other waits in ``Queue.get`` forever, and the trainer waits for its
  next batch (pytorch/pytorch#19228, an IterableDataset run once per worker; allenai/allennlp#1760;
  blind round 37's 07).
- ``slow_decoder``: the twin: the decoder puts a record every 0.2 s, for hours: the workers
  take each as it comes and the trainer trains on them (progressing).

READY_FILE gets ``"<pid> trainer"`` once the loop has stopped receiving batches
(``one_sentinel``) or has trained two (``slow_decoder``), and ``"<pid> worker"`` from each
DataLoader worker as it starts reading.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, IterableDataset

RECORDS = 64


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def decode(queue: object, mode: str) -> None:
    for i in range(RECORDS if mode == "one_sentinel" else 1 << 20):
        queue.put((i, [float(i % 7)] * 8))  # type: ignore[attr-defined]
        if mode == "slow_decoder":
            time.sleep(0.2)
    queue.put(None)  # type: ignore[attr-defined]  # one end-of-stream marker


class QueueStream(IterableDataset):  # type: ignore[type-arg]
    def __init__(self, queue: object, ready_file: str) -> None:
        self.queue, self.ready_file = queue, ready_file

    def __iter__(self):  # type: ignore[no-untyped-def]
        ready(self.ready_file, "worker")
        while True:
            item = self.queue.get()  # type: ignore[attr-defined]
            if item is None:
                return
            index, features = item
            yield torch.tensor(features), index % 3


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    torch.set_num_threads(1)
    queue = mp.Queue(maxsize=16)
    decoder = mp.Process(target=decode, args=(queue, mode), name="decoder")
    decoder.start()
    loader = DataLoader(QueueStream(queue, ready_file), batch_size=4, num_workers=2)
    model = torch.nn.Linear(8, 3)
    state = {"batches": 0, "last": time.monotonic()}

    def stalled() -> None:  # the decoder gone and no batch for 2 s: the loop has stopped
        while decoder.is_alive() or time.monotonic() - state["last"] < 2:
            time.sleep(0.2)  # the stall's own measure, not a readiness guess
        ready(ready_file, "trainer")

    if mode == "one_sentinel":
        threading.Thread(target=stalled, daemon=True).start()
    for features, labels in loader:
        torch.nn.functional.cross_entropy(model(features), labels).backward()
        state["batches"] += 1
        state["last"] = time.monotonic()
        if mode == "slow_decoder" and state["batches"] == 2:
            ready(ready_file, "trainer")


if __name__ == "__main__":
    main()
