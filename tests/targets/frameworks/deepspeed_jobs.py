"""Real DeepSpeed 0.19 jobs on CPU (``DS_ACCELERATOR=cpu``, gloo), 2 ranks under DeepSpeed's own
launcher: ``deepspeed --num_gpus 2 deepspeed_jobs.py MODE READY_FILE WORKDIR``. The launcher runs
``deepspeed.launcher.launch``, which starts each rank with ``--local_rank=N``.

Modes:
  ds_progress       ZeRO-2 training that goes on (healthy); ready after a few steps.
  ds_progress3      the same under ZeRO-3 (each layer's parameters gathered in its forward).
  ds_uneven_eval    deepspeedai/DeepSpeed#4910 (and #7128): ZeRO-3 evaluation where each rank
                    runs the forward passes of its own share of the prompts and rank 1's share
                    is shorter: rank 1, done, enters the ``dist.barrier()`` before the results
                    are written while rank 0's next forward waits in ZeRO-3's parameter
                    all_gather (the pre-forward hook that fetches each layer's shards).
  ds_save_rank0     deepspeedai/DeepSpeed#797, #2993 (huggingface/diffusers#2606):
                    ``engine.save_checkpoint`` called under ``if rank == 0``: every rank must
                    call it (it synchronizes them); rank 1 goes on to the next step.
"""

from __future__ import annotations

import os
import sys

READY_STEP = 4
SAVE_STEP = 2


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def engine_for(stage: int):  # deepspeed and torch, imported late (slow imports)
    import deepspeed
    import torch

    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                              torch.nn.ReLU(), torch.nn.Linear(64, 1))
    config = {"train_micro_batch_size_per_gpu": 8,
              # every parameter partitioned, however small (ZeRO-3 keeps small ones whole)
              "zero_optimization": {"stage": stage, "stage3_param_persistence_threshold": 0},
              "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
              "zero_allow_untested_optimizer": True,
              "steps_per_print": 1 << 30}
    engine, _, _, _ = deepspeed.initialize(model=net, model_parameters=net.parameters(),
                                           config=config)
    return engine


def train(mode: str, ready_file: str, workdir: str) -> None:
    import torch
    import torch.distributed as dist

    engine = engine_for(3 if mode == "ds_progress3" else 2)
    rank = dist.get_rank()
    x, y = torch.randn(8, 32), torch.randn(8, 1)
    step = 0
    while True:
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        step += 1
        if mode in ("ds_progress", "ds_progress3") and step == READY_STEP:
            ready(ready_file, f"rank{rank}")
        if mode == "ds_save_rank0" and step == SAVE_STEP:
            ready(ready_file, f"rank{rank}")
            if rank == 0:
                engine.save_checkpoint(os.path.join(workdir, "checkpoints"))


def uneven_eval(ready_file: str) -> None:
    import torch
    import torch.distributed as dist

    engine = engine_for(3)
    rank = dist.get_rank()
    shares = (6, 3)  # rank 0 was handed the longer share of the prompts
    prompts = [torch.randn(4, 32) for _ in range(shares[rank])]
    engine.eval()
    outputs = []
    with torch.no_grad():
        for i, prompt in enumerate(prompts):
            if i == shares[1]:  # the first forward rank 1 does not run
                ready(ready_file, f"rank{rank}")
            outputs.append(engine(prompt))
    ready(ready_file, f"rank{rank}")
    dist.barrier()  # every rank's answers in before rank 0 writes them


def main() -> None:
    # deepspeed.launcher.launch puts --local_rank=N before the script's own arguments
    mode, ready_file, workdir = [a for a in sys.argv[1:] if not a.startswith("--local_rank")]
    if mode == "ds_uneven_eval":
        uneven_eval(ready_file)
    else:
        train(mode, ready_file, workdir)


if __name__ == "__main__":
    main()
