"""A gloo training job for ``hangscope watch``, run under real torchrun on CPU.

``python -m torch.distributed.run --nproc-per-node 2 tests/targets/watch_job.py MODE READY``.
Each rank trains (a small matmul and an all_reduce per step) and appends ``"<pid> <what>
<epoch seconds>"`` to the READY file at each phase, so the test knows when each began.

Modes, each the shape of a real report:
  phases    trains, pauses 14 s for a checkpoint that rank 0 writes while the others wait in a
            barrier (torch.distributed.checkpoint / torch.save of rank 0, the others blocked:
            pytorch/pytorch#78196-style long saves), trains, pauses 9 s to reload data on every
            rank, trains, then hangs: the last rank calls all_gather while the others call
            all_reduce (a mismatched collective, pytorch/pytorch#84865-style).
  healthy   trains for as long as it runs.
  straggler trains, then the last rank spins in Python forever while the others wait in
            all_reduce (an infinite preprocessing loop, as in sgl-project/sglang#3211-style
            reports of one rank burning CPU while its peers wait).
  killrank  the last rank crashes (exit code 3) before it joins the process group, once the
            file GO appears beside READY, while the others wait for it in
            init_process_group (a rank that dies loading its shard: pytorch/pytorch#67038).
  finish    trains for 8 s and every rank exits 0.

``python tests/targets/watch_job.py launch MODE READY`` runs the ranks under a plain launcher
instead (the shape of a custom or per-node launcher that starts the ranks with RANK/WORLD_SIZE/
MASTER_* and waits for each, without tearing the others down when one fails).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

STEP_S = 0.05


def mark(ready: str, what: str) -> None:
    fd = os.open(ready, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {what} {time.time():.3f}\n".encode())
    finally:
        os.close(fd)


def train(torch, dist, seconds: float) -> None:
    x = torch.ones(64, 64)
    end = time.monotonic() + seconds
    while True:
        deadline = time.perf_counter() + STEP_S / 5
        y = x
        while time.perf_counter() < deadline:
            y = (y @ x).tanh()
        # The last element says "my time is up": the ranks stop at the same step, or one would
        # run one more all_reduce than the others and meet the next phase's collective.
        grad = torch.cat([y.sum(dim=0), torch.tensor([float(time.monotonic() >= end)])])
        dist.all_reduce(grad)
        if grad[-1] > 0:
            return
        time.sleep(STEP_S)


def save_checkpoint(rank: int, folder: str, seconds: float) -> None:
    """Rank 0 writes a checkpoint in chunks for ``seconds``; the others wait for it."""
    if rank != 0:
        return
    chunk = os.urandom(1 << 16)
    end = time.monotonic() + seconds
    with open(os.path.join(folder, "ckpt.bin"), "wb") as fh:
        while time.monotonic() < end:
            fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
            time.sleep(0.05)


def reload_data(seconds: float) -> None:
    """Every rank waits for its data shards (a slow file system)."""
    time.sleep(seconds)


def preprocess(tokens: list[int]) -> list[int]:
    """Pads to a multiple of 8 by steps of 16: never ends for an odd length."""
    length = len(tokens)
    while length % 8:
        length += 16
    return tokens + [0] * (length - len(tokens))


def launch(mode: str, ready: str, nproc: int = 2) -> int:
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    children = [subprocess.Popen(
        [sys.executable, __file__, mode, ready],
        env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc),
                 LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
        for r in range(nproc)]
    return max(child.wait() for child in children)


def main() -> int:
    if sys.argv[1] == "launch":
        return launch(sys.argv[2], sys.argv[3])
    mode, ready = sys.argv[1], sys.argv[2]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    folder = os.path.dirname(os.path.abspath(ready))
    mark(ready, "started")
    if mode == "killrank":
        if int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1:
            while not os.path.exists(os.path.join(folder, "GO")):
                time.sleep(0.05)
            mark(ready, "hang")
            os._exit(3)
        mark(ready, "hang")
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    last = rank == world - 1
    mark(ready, "training")
    if mode == "finish":
        train(torch, dist, 8)
        dist.destroy_process_group()
        mark(ready, "finished")
        return 0
    if mode == "healthy":
        while True:
            train(torch, dist, 60)
    train(torch, dist, 3)
    if mode == "phases":
        mark(ready, "checkpoint")
        save_checkpoint(rank, folder, 14)
        dist.barrier()
        train(torch, dist, 3)
        mark(ready, "reload")
        reload_data(9)
        dist.barrier()
        train(torch, dist, 3)
        t = torch.ones(4)
        mark(ready, "hang")
        if last:
            dist.all_gather([torch.zeros(4) for _ in range(world)], t)
        else:
            dist.all_reduce(t)
    elif mode == "straggler":
        mark(ready, "hang")
        if last:
            preprocess([1, 2, 3])
        dist.all_reduce(torch.ones(4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
