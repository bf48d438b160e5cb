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
"""

from __future__ import annotations

import os
import sys

STALL_STEP = 3
READY_STEP = 5


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
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 32), torch.randn(64, 1))
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=-1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=workdir)
    trainer.fit(Net(), DataLoader(data, batch_size=8))


if __name__ == "__main__":
    main()
