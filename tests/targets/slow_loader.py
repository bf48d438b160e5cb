"""A training loop bound by its DataLoader: each worker sleeps 6 s per batch (a remote fetch).

    python slow_loader.py READY

The main process appends ``"<pid> main"`` to READY once the first batch arrived, then blocks on
the workers' pipe for the next one, for seconds at a time: slow, not hung
(huggingface/lerobot#1488-style reports of a loop that looks frozen between steps).
"""

from __future__ import annotations

import os
import sys
import time

import torch
from torch.utils.data import DataLoader, IterableDataset


class FetchedShards(IterableDataset):
    def __iter__(self):  # type: ignore[no-untyped-def]
        while True:
            time.sleep(6.0)  # a GET from object storage
            yield torch.ones(4, 16)


def main() -> None:
    torch.set_num_threads(1)
    loader = DataLoader(FetchedShards(), batch_size=None, num_workers=2, prefetch_factor=1)
    weights = torch.zeros(16)
    for step, batch in enumerate(loader):
        weights += batch.mean(dim=0)
        if step == 0:
            with open(sys.argv[1], "a") as f:
                f.write(f"{os.getpid()} main\n")


if __name__ == "__main__":
    main()
