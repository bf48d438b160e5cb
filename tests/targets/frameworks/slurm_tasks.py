"""torch.distributed ranks that take their place from Slurm's environment, as Lightning's and
torch's SLURM environments do (``SLURM_PROCID``, ``SLURM_NTASKS``):

    python slurm_tasks.py MODE READY_FILE WORKDIR

- ``alone``: the allocation asks 2 tasks, but the script was run with ``python`` rather than
  ``srun``: one task starts, and rank 0 waits in ``init_process_group`` for rank 1 for ever
  (Lightning#8707, #19817; blind round 35's 07).
- ``srun``: the twin: both tasks started (as srun would), all-reducing step after step.

READY_FILE gets ``"<pid> rank<N>"`` once in ``init_process_group`` (``alone``) or after the
first all_reduce (``srun``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def task(ready_file: str, mode: str) -> None:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    if mode == "alone":  # inside init_process_group by then
        threading.Timer(1.0, ready, (ready_file, f"rank{rank}")).start()
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for step in range(1 << 30):
        dist.all_reduce(torch.ones(8))
        if step == 0:
            ready(ready_file, f"rank{rank}")


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, SLURM_NTASKS="2", SLURM_JOB_ID="4242", SLURM_NODEID="0",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    tasks = range(1 if mode == "alone" else 2)
    kids = [subprocess.Popen([sys.executable, __file__, "task", ready_file, mode],
                             env=dict(env, SLURM_PROCID=str(n), SLURM_LOCALID=str(n)))
            for n in tasks]
    for kid in kids:
        kid.wait()


if __name__ == "__main__":
    if sys.argv[1] == "task":
        task(sys.argv[2], sys.argv[3])
    else:
        main()
