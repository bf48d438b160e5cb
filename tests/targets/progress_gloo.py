"""A torchrun-style gloo job on CPU whose ranks progress or hang, for the progress watcher.

``python tests/targets/progress_gloo.py MODE --nproc 4 --ready-file PATH``. The launcher starts
one worker per rank (``RANK``/``WORLD_SIZE``/``MASTER_*`` in the environment, as torchrun does)
and waits for them. Each rank appends ``"<pid> <what>"`` to the ready file once it is in its
steady state (after its first completed step, or right before the call that hangs).

Modes:
  sleepy   healthy: rank 0 sleeps 300 ms per step (a slow data loader), then every rank
           all_reduces; the other ranks spend each step waiting for rank 0.
  compute  healthy: every rank computes ~20 ms, rank 0 also sleeps 300 ms, then all_reduce.
  mismatch hung: the last rank calls all_gather while the others call all_reduce.
  blocked  hung: rank 0 blocks forever on a lock nobody releases; the others all_reduce.
  poll     hung: rank 0 polls a flag that is never set (sleep 50 ms per check); the others
           all_reduce. Only the waiters' kernel counters and rank 0's wakes differ from sleepy.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta

MODES = ("sleepy", "compute", "mismatch", "blocked", "poll")


def _mark(path: str | None, what: str) -> None:
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {what}\n".encode())
    finally:
        os.close(fd)


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: a worker never outlives its launcher (tests kill the launcher)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def load_batch(rank: int) -> None:
    """A slow data loader: rank 0 waits on I/O for 300 ms per step."""
    if rank == 0:
        time.sleep(0.3)


def compute(torch_mod: object, x: object) -> object:
    """~20 ms of CPU work, like a small forward/backward on one core."""
    deadline = time.perf_counter() + 0.02
    y = x
    while time.perf_counter() < deadline:
        y = (y @ x).tanh()  # type: ignore[operator, union-attr]
    return y


def wait_for_flag(flag: threading.Event) -> None:
    """A polling wait for something that never happens."""
    while not flag.is_set():
        time.sleep(0.05)


def worker(mode: str, ready: str | None) -> None:
    _die_with_parent()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    grads = torch.ones(1024)
    x = torch.rand(64, 64) / 64
    step = 0
    while True:
        if mode == "mismatch" and step == 1:
            if rank == world - 1:
                out = [torch.zeros(4) for _ in range(world)]
                _mark(ready, f"rank{rank} all_gather")
                dist.all_gather(out, torch.zeros(4))
            else:
                _mark(ready, f"rank{rank} all_reduce")
                dist.all_reduce(grads)
        if mode in ("blocked", "poll") and step == 1:
            if rank == 0:
                _mark(ready, f"rank{rank} {mode}")
                if mode == "blocked":
                    lock = threading.Lock()
                    lock.acquire()
                    lock.acquire()  # nobody releases it
                wait_for_flag(threading.Event())
            elif step == 1:
                _mark(ready, f"rank{rank} all_reduce")
        load_batch(rank)
        if mode == "compute":
            compute(torch, x)
        dist.all_reduce(grads)
        step += 1
        if step == 1 and mode in ("sleepy", "compute"):
            _mark(ready, f"rank{rank} step")


def launch(mode: str, nproc: int, ready: str | None) -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        cmd = [sys.executable, os.path.abspath(__file__), mode, "--worker"]
        if ready:
            cmd += ["--ready-file", ready]
        procs.append(subprocess.Popen(cmd, env=env))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return max(p.wait() for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--ready-file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.mode, args.ready_file)
        return 0
    return launch(args.mode, args.nproc, args.ready_file)


if __name__ == "__main__":
    sys.exit(main())
