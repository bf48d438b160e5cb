"""FSDP2 (``fully_shard``) training over gloo on CPU, 2 ranks under torchrun, that logs the
gradient norm on the main process only (blind round 39's 02; TRI-ML/prismatic-vlms#35,
pytorch/torchtitan#766: FSDP2's gradients are sharded DTensors, so the norm's
``full_tensor()`` is an all_reduce over the mesh).

    python -m torch.distributed.run --nproc-per-node 2 fsdp_norm.py MODE READY_FILE WORKDIR

- ``norm_main``  ``is_main = rank == 0``; at the logging step ``if is_main:`` materialises the
                 norm: rank 0 waits in that all_reduce while rank 1, past it, waits in the next
                 forward's parameter all_gather.
- ``norm_all``   the twin: every rank computes the norm, rank 0 prints it (progressing).

Each rank appends ``"<pid> rank<N>"`` to READY_FILE at the logging step (``norm_all``: a few
logging steps later).
"""

from __future__ import annotations

import sys

from ddp_jobs import ready, sharded_model  # the same tiny FSDP2 model as ddp_jobs' modes

LOG_EVERY = 3


def main() -> None:
    import torch
    import torch.distributed as dist

    mode, ready_file = sys.argv[1:3]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    is_main = rank == 0
    model = sharded_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, 1 << 62):
        model(torch.randn(3, 32)).pow(2).mean().backward()
        if step % LOG_EVERY == 0:
            if mode == "norm_main" or step == 4 * LOG_EVERY:
                ready(ready_file, f"rank{rank}")
            grads = [p.grad for p in model.parameters()]
            if mode == "norm_all":
                norm = torch.nn.utils.get_total_norm(grads).full_tensor()
            if is_main and mode == "norm_main":  # the bug: a collective on the main rank only
                norm = torch.nn.utils.get_total_norm(grads).full_tensor()
            if is_main:
                print(f"step {step} grad_norm {norm.item():.4f}", flush=True)
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
