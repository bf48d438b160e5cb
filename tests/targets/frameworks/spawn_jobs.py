"""Real ``torch.multiprocessing.spawn`` training over gloo whose world size comes from a
config, not from the number of processes spawned:

    python spawn_jobs.py MODE READY_FILE WORKDIR

- ``world_from_config``: the config says ``world_size: 3`` (a 3-GPU machine's), the launcher
  spawns ``nprocs=2`` (this machine's device count): each rank calls
  ``init_process_group("gloo", init_method="tcp://...", rank=r, world_size=3)``; rank 0's
  TCPStore waits for 3 workers, rank 1 in the rendezvous for rank 2, whom nobody started
  (pytorch/pytorch#8091; blind round 31's 06, which read "progressing": rank 0's store
  answering rank 1's polls counted as work).
- ``world_matches``: the twin: world size 2, the ranks train DDP forever (progressing).
- ``port_per_rank``: each rank sets its own ``MASTER_PORT`` (the launcher's base port plus its
  rank, a per-device port copied from a serving config) and joins through ``env://``: rank 0
  hosts the store on the base port, rank 1 retries the next one, where nothing listens
  (Lightning#3957, pytorch#53395: every process picks its own free port; blind round 32's 05).

Each rank appends ``"<pid> rank<N>"`` to READY_FILE just before ``init_process_group``
(the hung modes) or after a few steps (``world_matches``); the launcher ``"<pid>
launcher"`` before it spawns.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys

CONFIG = {"world_from_config": {"world_size": 3, "lr": 0.01},
          "world_matches": {"world_size": 2, "lr": 0.01},
          "port_per_rank": {"world_size": 2, "lr": 0.01}}


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def train(rank: int, mode: str, port: int, ready_file: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    config = CONFIG[mode]
    if mode != "world_matches":
        ready(ready_file, f"rank{rank}")
    if mode == "port_per_rank":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port + rank))
    dist.init_process_group("gloo", init_method="env://" if mode == "port_per_rank"
                            else f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=config["world_size"],
                            timeout=datetime.timedelta(hours=1))
    torch.manual_seed(rank)
    model = DistributedDataParallel(torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for step in range(1 << 30):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 5:
            ready(ready_file, f"rank{rank}")


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    import torch.multiprocessing as mp

    nprocs = 2  # torch.cuda.device_count() on the machine it runs on
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ready(ready_file, "launcher")
    mp.spawn(train, args=(mode, port, ready_file), nprocs=nprocs, join=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
