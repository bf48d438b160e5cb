"""One rank of the namespace cluster's multi-node job: the last global rank calls all_gather,
every other rank all_reduce, so the job hangs across nodes (gloo cannot notice the mismatch).

Started by ``torchrun --nnodes N --nproc-per-node 2 ... worker.py READY_DIR``; before its
collective each rank writes ``READY_DIR/rank<R>.json`` with its rank, host and PID (as the
node sees it) so the test knows where every rank is without asking hangscope.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import timedelta
from pathlib import Path


def announce(ready_dir: Path, rank: int, op: str) -> None:
    """Write this rank's ready file atomically (rename), so a poller never reads half of it."""
    body = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid(), "op": op}
    tmp = ready_dir / f".rank{rank}.tmp"
    tmp.write_text(json.dumps(body))
    tmp.rename(ready_dir / f"rank{rank}.json")


def exchange_gradients(rank: int, ready_dir: Path) -> None:
    """The healthy ranks: average gradients."""
    import torch
    import torch.distributed as dist

    grads = torch.ones(4)
    announce(ready_dir, rank, "all_reduce")
    dist.all_reduce(grads)


def log_metrics(rank: int, world: int, ready_dir: Path) -> None:
    """The odd rank: it thinks it is time to log and gathers metrics."""
    import torch
    import torch.distributed as dist

    out = [torch.zeros(4) for _ in range(world)]
    announce(ready_dir, rank, "all_gather")
    dist.all_gather(out, torch.ones(4))


def main() -> int:
    import torch.distributed as dist

    ready_dir = Path(sys.argv[1])
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == world - 1:
        log_metrics(rank, world, ready_dir)
    else:
        exchange_gradients(rank, ready_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
