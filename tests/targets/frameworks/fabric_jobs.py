"""Lightning Fabric 2.6 on CPU (``L.Fabric(accelerator="cpu", devices=2, strategy="ddp")``,
gloo), run as ``python fabric_jobs.py MODE READY_FILE WORKDIR``: ``fabric.launch()`` re-runs
the script as rank 1 (its child, ``LOCAL_RANK=1``); the script's own process is rank 0.

Each rank trains a small model step after step and saves a checkpoint every ``EVERY`` steps,
then waits in ``fabric.barrier()`` "so the other ranks wait for the write". Modes:

- ``save_rank0``  the save is called on rank 0 only (``if fabric.is_global_zero:``). Fabric.save
                  ends in a barrier of its own: it pairs with rank 1's explicit barrier, rank 1
                  goes on to the next step's gradient all_reduce, and rank 0 waits in its
                  explicit barrier: one collective apart (Lightning-AI/pytorch-lightning#20027,
                  #19780; blind round 44's 07).
- ``save_all``    the twin: every rank calls ``fabric.save`` (it writes on rank 0 only), then
                  the barrier: training goes on (progressing).

Each rank appends ``"<pid> rankN"`` to READY_FILE after its first save (save_rank0: rank 0
as it leaves the save, rank 1 as it passes its barrier; save_all: after the first save).
"""

from __future__ import annotations

import os
import sys

EVERY = 5


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    import lightning as L
    import torch

    fabric = L.Fabric(accelerator="cpu", devices=2, strategy="ddp")
    fabric.launch()
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt = fabric.setup(model, opt)
    tag = f"rank{fabric.global_rank}"
    path = os.path.join(workdir, "last.ckpt")
    for step in range(1, 1_000_000):
        x = torch.randn(16, 32)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        fabric.backward(loss)
        opt.step()
        if step % EVERY == 0 and mode == "save_rank0" and fabric.is_global_zero:
            fabric.save(path, {"model": model, "step": step})
            if step == EVERY:
                ready(ready_file, tag)  # its save's own barrier passed: on to its barrier
        if step % EVERY == 0 and mode == "save_all":
            fabric.save(path, {"model": model, "step": step})
        if step % EVERY == 0:
            fabric.barrier()  # "keep the other ranks from running ahead while rank 0 writes"
            if step == EVERY and (mode == "save_all" or not fabric.is_global_zero):
                ready(ready_file, tag)


if __name__ == "__main__":
    main()
