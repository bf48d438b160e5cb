"""Real Ray Train (``ray.train.torch.TorchTrainer``, 2 CPU workers, DDP over gloo) run as
``python ray_train_jobs.py MODE READY_FILE WORKDIR``.

The driver starts a private Ray (``ray.init(num_cpus=2)``); Ray Train's controller starts two
workers (``ray::RayTrainWorker``), sets up torch.distributed between them and runs the training
function in each. Each worker appends ``"<pid> rank<N>"`` to READY_FILE once in its final
state. Modes:

- ``progress``      DDP training that goes on, reporting each epoch from every worker (healthy).
- ``report_rank0``  ``ray.train.report`` called by rank 0 only (its metrics, like a checkpoint
                    saved on rank 0): every worker must call it the same number of times, as
                    it synchronizes them (ray-project/ray#50874's warning: "Otherwise, your
                    training will hang"; ray-project/ray#43753, "hangs in loss.backward()").
                    Rank 0 waits in ``report`` for rank 1, which went on to the next step's
                    backward and waits in DDP's gradient all_reduce for rank 0.
- ``decode_paced`` the healthy twin of a paced loader: each step first decodes its batch for
                    0.12 s (a sleep, as a block read from slow storage is), then computes;
                    every worker reports each epoch of 40 steps (blind round 36's 05 read
                    "all waiting": the actor's main thread waits in Ray's task loop, the
                    training thread is the work).
- ``task_starved``  rank 0 asks a plain Ray task (one CPU, the default) for its evaluation
                    statistics and waits on it, while the two Train workers hold both CPUs of
                    the cluster: the task stays pending for ever (ray-project/ray#32856; blind
                    round 27's 04). Rank 1 waits in the next step's DDP all_reduce.
"""

from __future__ import annotations

import os
import sys
import time

READY_EPOCH = 2
STALL_EPOCH = 0


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def eval_stats(values: list[float]) -> float:
    return sum(values) / len(values)


def train_loop(config: dict) -> None:
    import ray.train
    import ray.train.torch
    import torch

    mode, ready_file = config["mode"], config["ready_file"]
    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    model = ray.train.torch.prepare_model(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    epoch = 0
    while True:
        for _ in range(40 if mode == "decode_paced" else 4):
            if mode == "decode_paced":
                time.sleep(0.12)  # decode the step's block of records
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        metrics = {"epoch": epoch, "loss": float(loss)}
        if mode == "task_starved":
            ready(ready_file, f"rank{rank}")
            if rank == 0:  # a plain task for the statistics: it needs a CPU the workers hold
                import ray

                metrics["mean"] = ray.get(ray.remote(eval_stats).remote([float(loss)]))
        elif mode == "report_rank0":
            if epoch == STALL_EPOCH:
                ready(ready_file, f"rank{rank}")
            if rank == 0:  # the metrics of rank 0 are the ones that matter
                ray.train.report(metrics)
        else:
            ray.train.report(metrics)
            if epoch == READY_EPOCH:
                ready(ready_file, f"rank{rank}")
        epoch += 1


def main() -> None:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    mode, ready_file, workdir = sys.argv[1:4]
    ray.init(num_cpus=2, include_dashboard=False)
    trainer = TorchTrainer(
        train_loop, train_loop_config={"mode": mode, "ready_file": ready_file},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(storage_path=os.path.join(workdir, "results")))
    trainer.fit()


if __name__ == "__main__":
    main()
