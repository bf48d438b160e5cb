"""A training loop bound by its DataLoader: each worker sleeps 6 s per batch (a remote fetch).

    python slow_loader.py READY [titled]

The main process appends ``"<pid> main"`` to READY once the first batch arrived, then blocks on
the workers' pipe for the next one, for seconds at a time: slow, not hung
(huggingface/lerobot#1488-style reports of a loop that looks frozen between steps).
``titled``: each worker sets its own process title in ``worker_init_fn`` (setproctitle), so
its comm is no longer torch's ``pt_data_worker``: only its stack says what it is.
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


def titled(worker_id: int) -> None:
    import setproctitle

    setproctitle.setproctitle(f"shard-fetcher-{worker_id}")


def main() -> None:
    torch.set_num_threads(1)
    init = titled if sys.argv[2:] == ["titled"] else None
    loader = DataLoader(FetchedShards(), batch_size=None, num_workers=2, prefetch_factor=1,
                        worker_init_fn=init)
    weights = torch.zeros(16)
    for step, batch in enumerate(loader):
        weights += batch.mean(dim=0)
        if step == 0:
            with open(sys.argv[1], "a") as f:
                f.write(f"{os.getpid()} main\n")


if __name__ == "__main__":
    main()
