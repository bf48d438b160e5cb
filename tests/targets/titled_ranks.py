"""A torchrun gloo job whose ranks rename themselves, and whose rank 0 computes for minutes.

    python -m torch.distributed.run --standalone --nproc-per-node 3 titled_ranks.py READY

Each rank sets a process title (``setproctitle``, as serving and training engines do), which
on Linux overwrites the memory /proc/PID/environ reads: RANK and LOCAL_RANK are gone from it.
Rank 0 then fits a spectral preconditioner (``torch.linalg.eigh`` over and over, minutes of
native math) while ranks 1-2 wait for it in all_reduce: slow, not hung (bergson#444-style
rank-0-only statistics). Each rank appends ``"<pid> rank<N>"`` to READY before its long call.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import setproctitle
import torch
import torch.distributed as dist


def precondition(grams: list[torch.Tensor]) -> float:
    total = 0.0
    while True:  # minutes of eigendecompositions: the test kills the job first
        for gram in grams:
            total += float(torch.linalg.eigh(gram).eigenvalues[-1])


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    setproctitle.setproctitle(f"optim-shard-{rank}")
    grams = [(m := torch.randn(256, 256)) @ m.T for _ in range(2)]
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()} rank{rank}\n")
    if rank == 0:
        precondition(grams)
    dist.all_reduce(torch.ones(4))


if __name__ == "__main__":
    main()
