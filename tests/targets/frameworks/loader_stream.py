"""Continual training from a stream, run as ``python loader_stream.py READY_FILE WORKDIR``: a
shipper process (multiprocessing, spawn) pushes one segment of records over ZMQ (PUSH to one
ipc endpoint per DataLoader worker), then sleeps until its next rotation (10 minutes); two
persistent DataLoader workers (an ``IterableDataset`` that PULLs) yield the records; the main
process trains on them. Once the first segment is trained, everyone waits for the next one:
the trainer on its loader, the workers on the shipper, the shipper on its timer. Healthy,
paused between phases (blind round 28's 08: it read "unknown, blocked", the trainer's get
timing out once every 5 s to check its workers, and the workers unwatched).

READY_FILE gets ``"<pid> trainer"`` once the first segment is trained.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import torch
import zmq
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

WORKERS = 2
RECORDS, PER_MESSAGE, DIM = 256, 32, 8


def endpoint(workdir: str, worker: int) -> str:
    return f"ipc://{workdir}/segments{worker}"


def ship(workdir: str) -> None:
    sock = zmq.Context().socket(zmq.PUSH)
    for w in range(WORKERS):
        sock.connect(endpoint(workdir, w))
    while True:
        x = torch.randn(RECORDS, DIM)
        for i in range(0, RECORDS, PER_MESSAGE):
            sock.send_pyobj(x[i:i + PER_MESSAGE].numpy())
        wait_for_rotation(600)


def wait_for_rotation(seconds: float) -> None:
    time.sleep(seconds)


class Stream(IterableDataset):
    def __init__(self, workdir: str) -> None:
        self.workdir = workdir

    def __iter__(self):  # type: ignore[no-untyped-def]
        info = get_worker_info()
        sock = zmq.Context().socket(zmq.PULL)
        sock.bind(endpoint(self.workdir, info.id if info is not None else 0))
        while True:
            for row in sock.recv_pyobj():
                yield torch.from_numpy(row)


def main() -> None:
    ready_file, workdir = sys.argv[1:3]
    torch.set_num_threads(1)
    shipper = mp.get_context("spawn").Process(target=ship, args=(workdir,), daemon=True)
    shipper.start()
    model = torch.nn.Linear(DIM, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Stream(workdir), batch_size=32, num_workers=WORKERS,
                        persistent_workers=True, multiprocessing_context="spawn")
    for step, x in enumerate(loader, 1):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == RECORDS // 32:
            with open(ready_file, "a") as f:
                f.write(f"{os.getpid()} trainer\n")


if __name__ == "__main__":
    main()
