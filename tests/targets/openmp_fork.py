"""A parent that runs torch's CPU operators on two OpenMP threads, then forks a
``multiprocessing.Pool`` whose workers run torch operators too:

    python openmp_fork.py MODE READY_FILE WORKDIR

- ``fork``: the pool forks after the parent's parallel region (libgomp's thread team): each
  worker's first parallel op waits at the team's barrier for threads it does not have
  (pytorch/pytorch#17199, #2245). Hung.
- ``spawn``: the same pool started with 'spawn': fresh interpreters, whose ops run. Busy.

READY_FILE gets ``"<pid> main"`` once the pool is asked for its first results (fork) or has
returned some (spawn).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys

import torch


def ready(path: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} main\n")


def normalise(i: int) -> float:
    x = torch.randn(2048, 512, generator=torch.Generator().manual_seed(i))
    return float(((x - x.mean(0)) / x.std(0)).abs().sum())


def main() -> None:
    mode, ready_file, _workdir = sys.argv[1:4]
    torch.set_num_threads(2)
    x = torch.randn(4096, 512)
    (x * x).sum(0)  # a parallel region: libgomp's team of 2 threads starts here
    context = mp.get_context(mode)
    with context.Pool(processes=2) as pool:
        told = False
        while True:
            results = pool.imap_unordered(normalise, range(16))
            if mode == "fork" and not told:
                ready(ready_file)
                told = True
            for _ in results:
                if not told:
                    ready(ready_file)
                    told = True


if __name__ == "__main__":
    main()
