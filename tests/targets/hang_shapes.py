"""Real hung jobs of shapes an independent blind test found misread (ported, new names).

    python hang_shapes.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE right before it enters the call it stays
in. Modes:

- ``shell``     a bash ``-c 'RANK=0 python ... & RANK=1 ... & RANK=2 ... & wait'`` starts 3 gloo
                ranks (MASTER_ADDR/PORT from the environment); rank 1 calls broadcast while
                ranks 0 and 2 call all_reduce.
- ``orphans``   the same ranks, each started by a ``sh -c '... &'`` that exits at once: no
                common parent (init adopts them), one rendezvous (MASTER_ADDR/PORT).
- ``zombie_fork`` 3 gloo ranks; rank 2 forks a helper (it keeps RANK=2) and exits with code 1,
                unreaped; ranks 0-1 wait in all_reduce for it.
- ``gcc``       3 ranks (RANK/WORLD_SIZE env) share a ``filelock.FileLock``; rank 0 holds it
                and runs gcc on generated C again and again (gcc's cc1 inherits RANK=0);
                ranks 1-2 poll the lock.
- ``inversion`` 3 gloo ranks; in rank 1, thread "loader" takes lock A then B and thread "stats"
                takes B then A (a lock-order inversion); rank 1's main thread joins "loader";
                ranks 0 and 2 wait in all_reduce.
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

KERNEL = """
double k_%(i)d(double *a, int n) {
  double s = 0;
  for (int r = 0; r < 64; r++)
    for (int i = 0; i < n; i++) s += a[i] * (r + %(i)d) / (i + 1.0);
  return s;
}
"""


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo():  # torch.distributed, imported late (a slow import)
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    return dist


def shell_rank(ready_file: str) -> None:
    import torch
    dist = _gloo()
    rank = dist.get_rank()
    value = torch.ones(2)
    dist.all_reduce(value)  # everyone joined: the mesh is up
    ready(ready_file, f"rank{rank}")
    if rank == 1:
        dist.broadcast(value, src=0)
    else:
        dist.all_reduce(value)


def gcc_rank(ready_file: str, workdir: str) -> None:
    from filelock import FileLock
    rank = int(os.environ["RANK"])
    lock = FileLock(os.path.join(workdir, "build.lock"))
    if rank != 0:
        # Rank 0 announces it holds the lock before the others try it.
        while "holder" not in Path(ready_file).read_text():
            time.sleep(0.02)
        ready(ready_file, f"rank{rank}")
        with lock:
            return
    with lock:
        ready(ready_file, "holder")
        for i in range(100000):
            src = os.path.join(workdir, f"k{i % 4}.c")
            with open(src, "w") as f:
                f.write("\n".join(KERNEL % {"i": i * 100 + j} for j in range(300)))
            subprocess.run(["gcc", "-O3", "-c", src, "-o", src + ".o"], check=True)


def inversion_rank(ready_file: str) -> None:
    import torch
    dist = _gloo()
    rank = dist.get_rank()
    value = torch.ones(2)
    dist.all_reduce(value)
    if rank != 1:
        ready(ready_file, f"rank{rank}")
        dist.all_reduce(value)
        return
    lock_a, lock_b = threading.Lock(), threading.Lock()
    both = threading.Barrier(2)

    def loader() -> None:
        with lock_a:
            both.wait()  # each thread holds its first lock before taking its second
            with lock_b:
                pass

    def stats() -> None:
        with lock_b:
            both.wait()
            with lock_a:
                pass

    first = threading.Thread(target=loader, name="loader")
    second = threading.Thread(target=stats, name="stats")
    first.start()
    second.start()
    while not (lock_a.locked() and lock_b.locked() and both.n_waiting == 0):
        time.sleep(0.01)
    time.sleep(0.2)  # both threads past the barrier, into their second acquire
    ready(ready_file, "rank1")
    first.join()


def fork_then_fail_rank(ready_file: str) -> None:
    import torch
    dist = _gloo()
    rank = dist.get_rank()
    value = torch.ones(2)
    dist.all_reduce(value)
    if rank == 2:
        if os.fork() == 0:  # a helper that outlives the rank, with its RANK=2 environment
            ready(ready_file, "helper")
            while True:
                time.sleep(60)
        ready(ready_file, "failing2")
        os._exit(1)  # the launcher waits for rank 0 first: rank 2 stays a zombie
    ready(ready_file, f"rank{rank}")
    dist.all_reduce(value)


def launch(mode: str, ready_file: str, workdir: str) -> None:
    """Start 3 ranks with torchrun's environment and wait for them."""
    env = dict(os.environ, WORLD_SIZE="3", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    me = [sys.executable, os.path.abspath(__file__), "--rank", mode, ready_file, workdir]
    if mode == "shell":
        line = " & ".join(f"RANK={r} {' '.join(me)}" for r in range(3))
        ready(ready_file, "launcher")
        subprocess.run(["bash", "-c", line + " & wait"], env=env, check=False)
        return
    if mode == "orphans":  # each rank from a shell that exits at once: init adopts them
        for r in range(3):
            subprocess.run(["sh", "-c", " ".join(me) + " &"], env=dict(env, RANK=str(r)),
                           check=True)
        ready(ready_file, "launcher")
        while True:  # the test kills the process group (the ranks keep it)
            time.sleep(60)
    children = [subprocess.Popen(me, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
                for r in range(3)]
    ready(ready_file, "launcher")
    for child in children:
        child.wait()


def rank_main(mode: str, ready_file: str, workdir: str) -> None:
    if mode in ("shell", "orphans"):
        shell_rank(ready_file)
    elif mode == "zombie_fork":
        fork_then_fail_rank(ready_file)
    elif mode == "gcc":
        gcc_rank(ready_file, workdir)
    elif mode == "inversion":
        inversion_rank(ready_file)


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(*sys.argv[2:5])
    else:
        launch(*sys.argv[1:4])
