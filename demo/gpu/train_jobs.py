"""Hung jobs on real training libraries, one rank each: run by ``demo/gpu/nccl_jobs.py``.

- ``ddp_uneven``: DistributedDataParallel with uneven inputs and no ``Join``: rank 1 has one
  batch more; its backward's bucket all_reduce waits while rank 0 has gone on to the
  ``dist.barrier()`` at the end of training.
- ``fsdp2``: ``fully_shard`` (FSDP2) on a small MLP; rank 0 runs one step more, so its
  forward's parameter all_gather waits while rank 1 sits in the final barrier.
- ``lightning``: a Lightning ``Trainer`` (strategy ``ddp``, one device per "node") whose
  ``training_step`` logs with ``sync_dist=True`` on rank 0 only: rank 0 waits in the metric's
  all_reduce, rank 1 in DDP's gradient all_reduce.

Each calls ``ready()`` just before the step that hangs. On CPU (``--dry-run``) they use gloo.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def _init(device) -> None:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    if device.type == "cpu":
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("nccl", device_id=device)


def _model(device):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 256)).to(device)


def ddp_uneven(device, ready: Callable[[], None]) -> None:  # type: ignore[no-untyped-def]
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    _init(device)
    rank = dist.get_rank()
    model = DDP(_model(device), device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = 3 + rank  # rank 1 has one batch more than rank 0
    for step in range(batches):
        if step == 3:
            ready()
        loss = model(torch.randn(32, 256, device=device)).square().mean()
        loss.backward()  # rank 1's 4th backward: its all_reduce has no partner
        opt.step()
        opt.zero_grad()
        loss.item()
    if rank == 0:
        ready()
    dist.barrier()  # rank 0 waits here for a rank still in its backward


def fsdp2(device, ready: Callable[[], None]) -> None:  # type: ignore[no-untyped-def]
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    _init(device)
    rank = dist.get_rank()
    model = _model(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps = 3 + (1 if rank == 0 else 0)  # rank 0 runs one step more
    for step in range(steps):
        if step == 3:
            ready()
        loss = model(torch.randn(16, 256, device=device)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss.item()
    if rank == 1:
        ready()
    dist.barrier()


def lightning(device, ready: Callable[[], None]) -> None:  # type: ignore[no-untyped-def]
    import lightning as L
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _model("cpu")

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            loss = self.net(batch[0]).square().mean()
            if batch_idx == 3:
                if self.global_rank == 0:
                    ready()
                    # only rank 0 logs with sync_dist: its all_reduce has no partner
                    self.log("loss", loss, sync_dist=True)
                else:
                    ready()
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = DataLoader(TensorDataset(torch.randn(256, 256)), batch_size=16)
    gpu = device.type == "cuda"
    trainer = L.Trainer(accelerator="cuda" if gpu else "cpu", devices=1,
                        num_nodes=int(os.environ["WORLD_SIZE"]),
                        strategy="ddp" if gpu else "ddp_find_unused_parameters_false",
                        max_steps=10, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), data)
