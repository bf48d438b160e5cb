"""Real Lightning training with its own launcher: ``Trainer(accelerator="cpu", devices=2,
strategy="ddp")`` run as ``python lightning_jobs.py MODE READY_FILE WORKDIR``.

Lightning's subprocess script launcher keeps rank 0 in the script's own process and starts
rank 1 as its child (the same command line, ``LOCAL_RANK=1`` in its environment). Each rank
appends ``"<pid> rank<N>"`` to READY_FILE once it is in its final state. Modes:

- ``progress``     trains forever; ready after a few steps (the healthy twin).
- ``rank0_stalls`` rank 0 blocks in its training step on a pipe nobody writes (a rank-0-only
                   step: a download, an upload, a prompt) while rank 1 waits in backward's
                   all_reduce for it. Lightning-AI/pytorch-lightning#21367 ("Selective Rank
                   Deadlock": ranks 0 and 2 hang while the others wait).
- ``ckpt_rank0``   a callback saves a checkpoint at each epoch's end under
                   ``if trainer.is_global_zero:``; ``save_checkpoint`` ends in the strategy's
                   barrier, which rank 1 never enters: it goes on to the next epoch and waits
                   in its first collective (Lightning-AI/pytorch-lightning#19045).
- ``ckpt_all``     the twin: every rank calls ``save_checkpoint`` (Lightning's way); trains on.
- ``uneven``       each rank trains on its own shard (``use_distributed_sampler=False``): 8
                   batches on rank 0, 6 on rank 1. Rank 1 ends its epoch and waits in
                   ModelCheckpoint's barrier while rank 0 waits in its 7th batch's first
                   collective. Lightning-AI/pytorch-lightning#9851 ("It will hang if there
                   is an uneven number of batches"), #19272; blind round 23's 06.
- ``es_rank0``     a validation metric computed and logged on rank 0 only
                   (``self.log(..., rank_zero_only=True)``) that ``EarlyStopping(strict=False)``
                   monitors: rank 0 runs its stopping decision's collectives, rank 1 (no metric)
                   skips them, and ModelCheckpoint's own decisions then pair one collective
                   apart (rank 0 in all_reduce, rank 1 in barrier): Lightning-AI/pytorch-
                   lightning#19045, blind round 39's 04.
- ``prepare_bcast`` a LightningDataModule's ``prepare_data`` builds a vocabulary and
                   broadcasts it through the strategy: Lightning runs ``prepare_data`` on local
                   rank 0 only, rank 1 waits in the barrier around it
                   (Lightning-AI/pytorch-lightning#2299; blind round 40's 07).
- ``ckpt_decorated`` the same checkpoint from a callback method under Lightning's own
                   ``@rank_zero_only`` (Lightning-AI/pytorch-lightning#18148: a collective
                   inside a rank-zero-only function; #19045).
"""

from __future__ import annotations

import os
import sys

STALL_STEP = 3
READY_STEP = 5
UNEVEN = (8, 6)  # batches of rank 0 and rank 1 in ``uneven``


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    import lightning as L
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                           torch.nn.Linear(64, 1))

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            if self.global_step == STALL_STEP and mode == "rank0_stalls":
                ready(ready_file, f"rank{self.global_rank}")
                if self.global_rank == 0:
                    r, _w = os.pipe()
                    os.read(r, 1)  # the rank-0-only step that never returns
            if self.global_step == READY_STEP and mode == "progress":
                ready(ready_file, f"rank{self.global_rank}")
            if mode == "uneven" and self.global_rank == 0 and batch_idx == UNEVEN[1] - 1:
                ready(ready_file, "rank0")  # its next batch waits for rank 1, which is done
            return torch.nn.functional.mse_loss(self.net(x), y)

        def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), sync_dist=True)

        def on_validation_epoch_end(self) -> None:
            if mode != "es_rank0" or self.trainer.sanity_checking:
                return
            ready(ready_file, f"rank{self.global_rank}")
            if self.trainer.is_global_zero:  # the bug: a monitored metric on rank 0 only
                self.log("val_score", 1.0, rank_zero_only=True)

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.01)

    from lightning.pytorch.utilities import rank_zero_only

    class SaveEveryEpoch(L.Callback):
        @rank_zero_only
        def export(self, trainer, path):  # type: ignore[no-untyped-def]
            trainer.save_checkpoint(path)  # the bug: a barrier inside a rank-zero-only method

        def on_train_epoch_end(self, trainer, pl_module):  # type: ignore[no-untyped-def]
            path = os.path.join(workdir, f"rank{trainer.global_rank}.ckpt")
            if mode == "uneven":
                ready(ready_file, f"rank{trainer.global_rank}")  # rank 1, out of batches
            if mode == "ckpt_decorated":
                ready(ready_file, f"rank{trainer.global_rank}")
                self.export(trainer, path)
            if mode == "ckpt_rank0":
                ready(ready_file, f"rank{trainer.global_rank}")
                if trainer.is_global_zero:  # the bug: a collective on rank 0 only
                    trainer.save_checkpoint(path)
            elif mode == "ckpt_all":
                trainer.save_checkpoint(path)
                if trainer.current_epoch == 1:
                    ready(ready_file, f"rank{trainer.global_rank}")

    torch.manual_seed(0)
    rows = 64
    if mode == "uneven":  # the script is rank 0; Lightning starts rank 1 with LOCAL_RANK=1
        rows = 8 * UNEVEN[int(os.environ.get("LOCAL_RANK", "0"))]
    data = TensorDataset(torch.randn(rows, 32), torch.randn(rows, 1))
    if mode == "prepare_bcast":
        class Chars(L.LightningDataModule):
            def __init__(self) -> None:
                super().__init__()
                if os.environ.get("LOCAL_RANK", "0") != "0":
                    ready(ready_file, "rank1")  # it goes on into Lightning's barrier

            def prepare_data(self) -> None:  # Lightning: local rank 0 only
                ready(ready_file, "rank0")
                self.trainer.strategy.broadcast(sorted(set("hello world")), src=0)  # the bug

            def train_dataloader(self):  # type: ignore[no-untyped-def]
                return DataLoader(data, batch_size=8)

        trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=-1,
                            logger=False, enable_progress_bar=False,
                            enable_model_summary=False, default_root_dir=workdir)
        trainer.fit(Net(), datamodule=Chars())
        return
    if mode == "es_rank0":
        from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

        trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=-1,
                            logger=False, enable_progress_bar=False,
                            enable_model_summary=False, default_root_dir=workdir,
                            num_sanity_val_steps=0,
                            callbacks=[EarlyStopping(monitor="val_score", mode="max",
                                                     strict=False),
                                       ModelCheckpoint(dirpath=workdir, save_last=True)])
        trainer.fit(Net(), DataLoader(data, batch_size=8), DataLoader(data, batch_size=8))
        return
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=-1,
                        logger=False, enable_checkpointing=mode == "uneven",
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=workdir, use_distributed_sampler=mode != "uneven",
                        callbacks=[SaveEveryEpoch()] if mode.startswith("ckpt")
                        or mode == "uneven" else [])
    trainer.fit(Net(), DataLoader(data, batch_size=8))


if __name__ == "__main__":
    main()
