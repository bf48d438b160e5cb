"""One rank of the namespace cluster's job for ``hangscope watch --nodes``: it trains until the
test drops a file beside the ready files, then does what the file says.

Started by ``torchrun --nnodes N ... watch_worker.py READY_DIR``. Each rank trains (a small
matmul and an all_reduce per step, then a short sleep) and appends ``"<rank> <host> <pid>
<what> <epoch seconds>"`` to ``READY_DIR/marks`` at each phase. The ranks agree in each step's
all_reduce on whether a file appeared, so they all stop training at the same step:

  HANG  the last rank calls all_gather while the others call all_reduce (mismatched
        collectives across nodes; gloo cannot notice).
  DIE   the last rank exits with status 3 while the others wait in the job's store for the
        checkpoint it never writes (a rank that crashed saving its shard).
  PAUSE the last rank sleeps PAUSE_S seconds (a slow checkpoint write) while the others wait
        for it in all_reduce, then every rank trains on ("resumed").
"""

from __future__ import annotations

import os
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

STEP_S = 0.05
TRIGGERS = ("HANG", "DIE", "PAUSE")
#: How long the last rank stops for a PAUSE (the others wait for it in all_reduce).
PAUSE_S = 25.0


def mark(ready_dir: Path, rank: int, what: str) -> None:
    line = f"{rank} {socket.gethostname()} {os.getpid()} {what} {time.time():.3f}\n"
    fd = os.open(ready_dir / "marks", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def train(ready_dir: Path) -> str:
    """Train until a trigger file appears; the trigger every rank agreed on."""
    import torch
    import torch.distributed as dist

    x = torch.ones(32, 32)
    while True:
        deadline = time.perf_counter() + STEP_S / 5
        y = x
        while time.perf_counter() < deadline:
            y = (y @ x).tanh()
        seen = [float((ready_dir / name).exists()) for name in TRIGGERS]
        grad = torch.cat([y.sum(dim=0), torch.tensor(seen)])
        dist.all_reduce(grad)
        for i, name in enumerate(TRIGGERS):
            if grad[-len(TRIGGERS) + i] > 0:
                return name
        time.sleep(STEP_S)


def main() -> int:
    import torch
    import torch.distributed as dist

    ready_dir = Path(sys.argv[1])
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    mark(ready_dir, rank, "training")
    trigger = train(ready_dir)
    mark(ready_dir, rank, trigger.lower())
    last = rank == world - 1
    if trigger == "PAUSE":
        (ready_dir / "PAUSE").unlink(missing_ok=True)
        if last:
            time.sleep(PAUSE_S)
        dist.all_reduce(torch.ones(4))
        mark(ready_dir, rank, "resumed")
        train(ready_dir)
        return 0
    if trigger == "HANG":
        if last:
            out = [torch.zeros(4) for _ in range(world)]
            dist.all_gather(out, torch.ones(4))
        else:
            dist.all_reduce(torch.ones(4))
    elif last:
        os._exit(3)
    else:
        store = dist.distributed_c10d._get_default_store()
        store.wait(["checkpoint-written"], timedelta(hours=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
