"""Demo: a collective mismatch between gloo ranks (the classic silent hang).

Four ranks (spawned torchrun-style by this file's launcher) join a gloo process
group. The last rank resumed from a checkpoint one step newer than the others,
so at the first step it decides it is time to log and calls
``dist.all_gather`` in ``gather_metrics``, while ranks 0..N-2 call
``dist.all_reduce`` in ``sync_gradients``. Nobody ever completes.

Verified with torch 2.13 (CPU, gloo): an all_reduce on ranks 0-2 against an
all_gather on rank 3 does NOT raise; every rank blocks in ``work.wait()`` until
the process-group timeout, then fails with "Timed out waiting ... for recv/send
operation to complete". Same for barrier-vs-all_reduce, broadcast-vs-all_reduce
and differently sized all_gather. Gloo matches messages by a per-collective
sequence tag, not by op type, so it cannot notice. The timeout here is one hour,
which for a debugger is forever. (``TORCH_DISTRIBUTED_DEBUG=DETAIL`` would catch
the mismatch; it is deliberately not set.)

Run it::

    python -m hangscope.demo.mismatch [--nproc-per-node 4] [--ready-file PATH]
    python demo/mismatch.py
    torchrun --standalone --nproc-per-node 4 -m hangscope.demo.mismatch --rank-worker

The launcher waits on its children with ``Popen.wait`` forever. With
``--ready-file`` (or ``$HANGSCOPE_DEMO_READY``) each rank appends
``"<pid> rank<R> all_reduce|all_gather"`` right before its blocking collective.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

if __package__:
    from . import _common
else:  # run as ``python demo/mismatch.py``: demo/ is sys.path[0]
    import _common  # type: ignore[no-redef]

if TYPE_CHECKING:
    import torch

#: Metrics are gathered on every rank whenever ``step % LOG_EVERY == 0``.
LOG_EVERY = 100
#: Step the job resumes from; the last rank's checkpoint is one step newer.
RESUME_STEP = 99


def sync_gradients(grads: torch.Tensor, rank: int) -> None:
    """Average gradients across ranks (ranks 0..N-2 hang here)."""
    import torch.distributed as dist

    _common.mark_ready(f"rank{rank} all_reduce")
    dist.all_reduce(grads)  # HANG: the last rank is in all_gather, not all_reduce
    grads /= dist.get_world_size()


def gather_metrics(metrics: torch.Tensor, rank: int, world_size: int) -> list[torch.Tensor]:
    """Collect per-rank metrics for logging (the last rank hangs here)."""
    import torch
    import torch.distributed as dist

    gathered = [torch.zeros_like(metrics) for _ in range(world_size)]
    _common.mark_ready(f"rank{rank} all_gather")
    dist.all_gather(gathered, metrics)  # HANG: the other ranks are in all_reduce
    return gathered


def train_step(step: int, rank: int, world_size: int) -> None:
    """One training step: maybe log metrics, then all-reduce gradients."""
    import torch

    grads = torch.full((4,), float(rank + 1))
    if step % LOG_EVERY == 0:
        gather_metrics(torch.tensor([float(step), float(rank), 0.0, 0.0]), rank, world_size)
    sync_gradients(grads, rank)


def resume_step(rank: int, world_size: int) -> int:
    """Step restored from the checkpoint; the last rank found a newer one (the bug)."""
    return RESUME_STEP + 1 if rank == world_size - 1 else RESUME_STEP


def rank_main() -> int:
    """Body of one rank; reads RANK/WORLD_SIZE/MASTER_* from the env like under torchrun."""
    _common.default_signals()
    _common.die_with_parent()
    _common.import_torch()
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if world_size < 2:
        raise SystemExit("mismatch demo needs at least 2 ranks")
    # One hour: long enough that, for the debugger, the job is hung for good.
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    step = resume_step(rank, world_size)
    train_step(step, rank, world_size)
    dist.destroy_process_group()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return _common.gloo_demo_main(
        argv,
        prog="python -m hangscope.demo.mismatch",
        description="gloo job that hangs: rank N-1 calls all_gather, the others all_reduce",
        rank_main=rank_main,
        module_name=__spec__.name if __spec__ else None,
        file=__file__,
    )

if __name__ == "__main__":
    _common.run_main(main)
