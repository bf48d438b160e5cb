"""Demo: a straggler rank that burns CPU and never reaches the collective.

Four gloo ranks (spawned torchrun-style by this file's launcher) broadcast
their initial weights (this collective works), then run ``train_step``:
preprocess their batch, then ``dist.all_reduce`` the gradients. Ranks 0..N-2
get samples whose lengths are already multiples of 8 and go straight to the
all_reduce, where they wait (idle, 0 % CPU). The last rank's shard contains an
odd-length sample, and ``preprocess_batch`` pads it by stepping 16 tokens at a
time until the length is a multiple of 8, which never happens: that rank spins
at 100 % CPU in pure Python forever.

So, unlike the mismatch demo, three ranks are blocked in the *same* collective
and one rank is busy (not blocked) elsewhere: a straggler, not a mismatch.

Run it::

    python -m hangscope.demo.straggler [--nproc-per-node 4] [--ready-file PATH]
    python demo/straggler.py

With ``--ready-file`` (or ``$HANGSCOPE_DEMO_READY``) ranks 0..N-2 append
``"<pid> rank<R> all_reduce"`` right before the all_reduce and the last rank
appends ``"<pid> rank<R> preprocess_batch"`` right before it starts spinning.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

if __package__:
    from . import _common
else:  # run as ``python demo/straggler.py``: demo/ is sys.path[0]
    import _common  # type: ignore[no-redef]

if TYPE_CHECKING:
    import torch

#: Sequences are padded to a multiple of this many tokens...
PAD_MULTIPLE = 8
#: ...by adding this many at a time. The bug: 16 should have been 1, so any
#: length that is not already a multiple of 8 never becomes one.
PAD_STEP = 16


def shard_lengths(rank: int, world_size: int) -> list[int]:
    """Sample lengths of this rank's batch; only the last shard has an odd one."""
    if rank == world_size - 1:
        return [64, 128, 37]
    return [64, 128, 256]


def preprocess_batch(lengths: list[int], rank: int) -> torch.Tensor:
    """Pad every sample to a multiple of PAD_MULTIPLE (the last rank spins here)."""
    import torch

    checksum = 0
    padded_lengths: list[float] = []
    for length in lengths:
        padded = length
        if padded % PAD_MULTIPLE != 0:
            # Demo hook only: tell the harness this rank is about to spin.
            _common.mark_ready(f"rank{rank} preprocess_batch")
        while padded % PAD_MULTIPLE != 0:  # SPIN: 37 + 16k is never a multiple of 8
            padded += PAD_STEP
            checksum = (checksum * 31 + padded) % 1_000_003
        padded_lengths.append(float(padded))
    return torch.tensor(padded_lengths)


def broadcast_initial_weights(rank: int) -> torch.Tensor:
    """Start every rank from rank 0's weights, like DDP's constructor does.

    This first collective succeeds; it also means the straggler only starts
    spinning once every rank has finished its (slow) torch import.
    """
    import torch
    import torch.distributed as dist

    weights = torch.full((3,), float(rank))
    dist.broadcast(weights, src=0)
    return weights


def train_step(rank: int, world_size: int) -> None:
    """Preprocess, "compute" gradients, then all-reduce them (ranks 0..N-2 wait here)."""
    import torch.distributed as dist

    batch = preprocess_batch(shard_lengths(rank, world_size), rank)
    grads = batch / batch.sum()
    _common.mark_ready(f"rank{rank} all_reduce")
    dist.all_reduce(grads)  # HANG: waits for the last rank, still in preprocess_batch


def rank_main() -> int:
    """Body of one rank; reads RANK/WORLD_SIZE/MASTER_* from the env like under torchrun."""
    _common.default_signals()
    _common.die_with_parent()
    _common.import_torch()
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    # One hour: long enough that, for the debugger, the job is hung for good.
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    broadcast_initial_weights(rank)
    train_step(rank, world_size)
    dist.destroy_process_group()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return _common.gloo_demo_main(
        argv,
        prog="python -m hangscope.demo.straggler",
        description="gloo job that hangs: the last rank spins in Python, the others all_reduce",
        rank_main=rank_main,
        module_name=__spec__.name if __spec__ else None,
        file=__file__,
    )

if __name__ == "__main__":
    _common.run_main(main)
