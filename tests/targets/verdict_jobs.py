"""Real jobs for the verdict tests (issue 11): file locks, a reaped rank, p2p, titles, compile.

    python verdict_jobs.py MODE READY_FILE WORKDIR

The launcher starts the ranks as child processes with torchrun's environment (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT) and reaps them, like torchrun's agent. Each process
appends ``"<pid> <tag>"`` to READY_FILE right before it enters the call it stays in, so a test
knows the job is where it should be without sleeping. Modes:

- ``filelock``  rank 0 holds a ``filelock.FileLock`` on WORKDIR/.lock (the JIT-cache pattern)
                and sleeps in ``build_kernel``; ranks 1-2 block acquiring it (filelock polls).
- ``flock``     the same with blocking ``fcntl.flock`` (waiters show in /proc/locks as "->").
- ``missing``   a WORLD_SIZE=4 gloo job: rank 3 exits (code 3) and is reaped; 0-2 wait to join.
- ``missing_unreaped``  the same, but the launcher waits for rank 0 first: rank 3 is a zombie.
- ``p2p_cycle`` 3 gloo ranks that each recv from the previous rank before sending: a cycle.
- ``p2p_stalled`` rank 0 sleeps instead of sending; rank 1 receives from 0, rank 2 from 1.
- ``roots``     2 gloo ranks broadcast, each naming itself the source.
- ``p2p_tags``  2 gloo ranks: rank 0 sends with tag 7, rank 1 receives from it with tag 8.
- ``p2p_async_tags`` rank 2 isends to rank 1 with another tag than rank 1 irecvs; rank 0 waits on 1.
- ``p2p_async_recv`` every rank posts irecv from both neighbours, then waits: nobody sends.
- ``new_group_skip`` ranks 0 and 2 create a new group of ranks 0-2; rank 1, a member, skips the
                  call and waits in a barrier.
- ``new_group_drift`` 2 ranks: a tracker built on rank 0 alone creates a group first; then
                  both create "meta" at one line: rank 1's pairs with rank 0's tracker group,
                  rank 0 waits for a peer in its meta, rank 1 all_gathers on its meta.
- ``recv_any``  4 gloo ranks with long setproctitle titles: rank 0 receives from any source
                one report per rank, rank 2 skips its send; ranks 1-3 wait in barrier.
- ``p2p_ok``    a healthy 3-stage pipeline of matched send/recv of 16 MB each step.
- ``dp_tp``     4 processes titled ``sglang::scheduler_DP<d>_TP<t>`` (setproctitle), waiting.
- ``dp_tp_mismatch`` 6 gloo ranks titled DP<d>_TP<t> (2 x 3): DP0 in a world all_reduce, DP1's
                TP0-1 in all_reduce and TP2 in all_gather of their TP group.
- ``user_names`` one process whose threads wait in user functions named item, tolist, cpu
                and capture_graph (names of torch syncs and capture, but not torch's).
- ``dataloader`` one process whose 2 DataLoader workers wait forever inside __getitem__.
- ``pylock``    one process: thread "holder" holds a threading.Lock, two threads wait on it.
- ``compile``   one process (no launcher) running torch.compile on CPU (Inductor builds C++
                with 2 compile workers), fresh cache; ready "compiling" before, "compiled" after.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

WORLD = {"filelock": 3, "flock": 3, "missing": 4, "missing_unreaped": 4, "p2p_cycle": 3,
         "p2p_ok": 3, "p2p_stalled": 3, "p2p_async_tags": 3, "p2p_async_recv": 3, "p2p_tags": 2,
         "roots": 2,
         "new_group_skip": 3, "new_group_drift": 2, "dp_tp": 4, "dp_tp_mismatch": 6, "recv_any": 4}


class _Tracker:
    """An experiment tracker that syncs its metrics over a group of its own."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.group = dist.new_group([0, 1])


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def wait_for_line(path: str, tag: str, timeout: float = 60.0) -> None:
    """Block until another process wrote ``tag`` to the ready file (its handshake)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(line.split()[1:] == [tag] for line in Path(path).read_text().splitlines()):
            return
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {tag}")


def build_kernel(seconds: float) -> None:
    time.sleep(seconds)  # the lock holder's long "compile"


def lock_rank(mode: str, rank: int, ready_file: str, workdir: str) -> None:
    path = os.path.join(workdir, ".lock")
    if mode == "filelock":
        import filelock

        lock = filelock.FileLock(path)
        if rank == 0:
            lock.acquire()
            ready(ready_file, "holder")
            build_kernel(3600)
        wait_for_line(ready_file, "holder")
        ready(ready_file, f"waiter{rank}")
        lock.acquire()
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if rank == 0:
        fcntl.flock(fd, fcntl.LOCK_EX)
        ready(ready_file, "holder")
        build_kernel(3600)
    wait_for_line(ready_file, "holder")
    ready(ready_file, f"waiter{rank}")
    fcntl.flock(fd, fcntl.LOCK_EX)


def gloo_rank(mode: str, rank: int, world: int, ready_file: str) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    if mode.startswith("missing"):
        # Rank 3 fails before it joins. (Once joined, a gloo peer's exit closes its sockets
        # and the others fail at once instead of waiting; NCCL ranks would wait.)
        if rank == 3:
            ready(ready_file, "leaving3")
            os._exit(3)
        ready(ready_file, f"rank{rank}")
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(hours=1))
    t = torch.ones(4)
    if mode.startswith("missing"):
        dist.all_reduce(t)
        return
    if mode == "dp_tp_mismatch":
        dp_tp_mismatch(rank, t, ready_file)
        return
    prev, nxt = (rank - 1) % world, (rank + 1) % world
    if mode == "p2p_cycle":
        ready(ready_file, f"rank{rank}")
        dist.recv(t, src=prev)  # every stage receives first: nobody sends
        dist.send(t, dst=nxt)
        return
    if mode == "roots":
        # A resume: each rank finds a checkpoint on its own scratch disk and broadcasts it,
        # naming itself the source (blind round 33's 05).
        ready(ready_file, f"rank{rank}")
        dist.broadcast(t, src=rank)
        return
    if mode == "p2p_tags":
        # A 2-stage pipeline tagging each micro-batch by its step; the receiving stage counts
        # its steps from 1 (gloo#308): rank 0 sends with tag 7, rank 1 waits for tag 8.
        ready(ready_file, f"rank{rank}")
        step = 7
        if rank == 0:
            dist.send(t, dst=1, tag=step)
        else:
            dist.recv(t, src=0, tag=step + 1)
        return
    if mode == "p2p_async_tags":
        # A reversed pipeline (2 -> 1 -> 0) whose tags disagree: rank 2's isend (tag 7) never
        # meets rank 1's irecv (tag 8); rank 0 waits for rank 1 behind them. Only Work.wait()
        # is on the stacks: no c10d frame holds a peer.
        if rank == 2:
            work = dist.isend(t, dst=1, tag=7)
        else:
            work = dist.irecv(t, src=rank + 1, tag=8 if rank == 1 else 0)
        ready(ready_file, f"rank{rank}")
        work.wait()
        return
    if mode == "new_group_skip":
        dist.all_reduce(t)
        ready(ready_file, f"rank{rank}")
        if rank != 1:  # a config branch skips the call on rank 1, a member of the group
            group = dist.new_group([0, 1, 2])
            dist.broadcast(t, src=0, group=group)
        else:
            dist.barrier()
        return
    if mode == "new_group_drift":  # (pytorch#134314, #173608)
        tracker = _Tracker() if rank == 0 else None  # noqa: F841 (it holds its group)
        ready(ready_file, f"rank{rank}")
        meta = dist.new_group([0, 1])
        dist.all_gather_object([None, None], rank, group=meta)
        return
    if mode == "p2p_async_recv":
        works = [dist.irecv(t, src=prev), dist.irecv(torch.ones(4), src=nxt)]
        ready(ready_file, f"rank{rank}")
        for work in works:  # every rank posts its receives first: nobody sends
            work.wait()
        return
    if mode == "recv_any":
        recv_any(rank, world, t, ready_file)
        return
    if mode == "p2p_stalled":
        ready(ready_file, f"rank{rank}")
        if rank == 0:
            build_kernel(3600)  # the first stage never sends
        dist.recv(t, src=rank - 1)
        return
    ready(ready_file, f"rank{rank}")
    t = torch.ones(1 << 22)  # 16 MB a step, so that a pair is often caught mid-transfer
    while True:  # p2p_ok: stage 0 feeds 1 feeds 2; each step is a matched pair
        if rank > 0:
            dist.recv(t, src=rank - 1)
        time.sleep(0.01)
        if rank < world - 1:
            dist.send(t, dst=rank + 1)


def recv_any(rank: int, world: int, t: object, ready_file: str) -> None:
    """Rank 0 gathers one report from every other rank with recv from any source, then
    meets them in a barrier; rank 2's shard is empty and it skips its send. The titles, long
    as a service's are, overwrite /proc/PID/environ (setproctitle)."""
    import setproctitle
    import torch.distributed as dist

    setproctitle.setproctitle(f"shard-evaluator rank={rank} --collect-reports --shards=/data")
    if rank == 0:
        ready(ready_file, "rank0")
        for _ in range(world - 1):
            dist.recv(t)  # type: ignore[arg-type]
    elif rank != 2:
        dist.send(t, dst=0)  # type: ignore[arg-type]
    ready(ready_file, f"rank{rank}") if rank else None
    dist.barrier()


def dp_tp_mismatch(rank: int, t: object, ready_file: str) -> None:
    """DP2 x TP3 gloo ranks titled as SGLang schedulers: replica 0 waits in a world
    all_reduce (replica 1 never joins it); in replica 1, TP0-1 all_reduce in their TP group
    and TP2 all_gathers in it: the mismatch is in DP1 only, and its odd one out is DP1·TP2."""
    import setproctitle
    import torch.distributed as dist

    dp, tp = divmod(rank, 3)
    setproctitle.setproctitle(f"sglang::scheduler_DP{dp}_TP{tp}")
    groups = [dist.new_group([0, 1, 2]), dist.new_group([3, 4, 5])]
    ready(ready_file, f"rank{rank}")
    if dp == 0:
        dist.all_reduce(t)
    elif tp < 2:
        dist.all_reduce(t, group=groups[1])
    else:
        dist.all_gather([t.clone() for _ in range(3)], t, group=groups[1])


def titled_rank(rank: int, ready_file: str) -> None:
    import setproctitle

    dp, tp = divmod(rank, 2)
    setproctitle.setproctitle(f"sglang::scheduler_DP{dp}_TP{tp}")
    event = threading.Event()
    ready(ready_file, f"rank{rank}")
    event.wait()


def compile_rank(ready_file: str) -> None:
    import torch

    layers = [torch.nn.Linear(64, 64) if i % 2 == 0 else torch.nn.GELU() for i in range(160)]
    model = torch.compile(torch.nn.Sequential(*layers))
    # Start Inductor's compile-worker pool (compile_worker/__main__.py --parent=PID) as it
    # does on a machine with Triton; on CPU it then compiles C++ with g++ in threads, so the
    # workers sit idle: the shape of "32 idle compile workers" in issue 11.
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.warm_pool()
    AsyncCompile.wakeup()
    ready(ready_file, "compiling")
    model(torch.randn(8, 64))
    ready(ready_file, "compiled")
    threading.Event().wait()


def rank_main(mode: str, ready_file: str, workdir: str) -> None:
    rank = int(os.environ["RANK"])
    if mode in ("filelock", "flock"):
        lock_rank(mode, rank, ready_file, workdir)
    elif mode == "dp_tp":
        titled_rank(rank, ready_file)
    else:
        gloo_rank(mode, rank, int(os.environ["WORLD_SIZE"]), ready_file)
    threading.Event().wait()


def python_lock(ready_file: str) -> None:
    """One process: thread "holder" takes a threading.Lock and sleeps; two threads wait on it."""
    lock = threading.Lock()
    held = threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            build_kernel(3600)

    def waiter() -> None:
        held.wait()
        ready(ready_file, threading.current_thread().name)
        with lock:
            pass

    threading.Thread(target=holder, name="holder", daemon=True).start()
    for name in ("waiter1", "waiter2"):
        threading.Thread(target=waiter, name=name, daemon=True).start()
    threading.Event().wait()


def user_names(ready_file: str) -> None:
    """One process whose own functions are named like torch's syncs and capture: item,
    tolist, cpu, capture_graph; each thread waits on an Event inside one of them."""
    never = threading.Event()

    def item() -> None:
        ready(ready_file, "item")
        never.wait()

    def tolist() -> None:
        ready(ready_file, "tolist")
        never.wait()

    def cpu() -> None:
        ready(ready_file, "cpu")
        never.wait()

    def capture_graph() -> None:
        ready(ready_file, "capture_graph")
        never.wait()

    for fn in (item, tolist, cpu, capture_graph):
        threading.Thread(target=fn, name=fn.__name__, daemon=True).start()
    never.wait()


class _StuckDataset:
    """A dataset whose items never come: each DataLoader worker waits inside __getitem__."""

    def __init__(self, ready_file: str) -> None:
        self.ready_file = ready_file

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> int:
        ready(self.ready_file, f"worker{index % 2}")
        threading.Event().wait()
        return index


def data_loader(ready_file: str) -> None:
    """One process iterating a DataLoader with 2 workers (forked copies of it, comm
    pt_data_worker) that never deliver: the main waits for them."""
    import torch.utils.data

    loader = torch.utils.data.DataLoader(_StuckDataset(ready_file), num_workers=2,
                                         batch_size=None, prefetch_factor=1)
    for _ in loader:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(mode: str, ready_file: str, workdir: str) -> None:
    """Start the ranks as torchrun would (env), reap each that exits, wait for the rest."""
    if mode == "pylock":
        python_lock(ready_file)
    if mode == "user_names":
        user_names(ready_file)
    if mode == "dataloader":
        data_loader(ready_file)
    if mode == "compile":  # one process, the job's root: it compiles, its workers help
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(workdir, "inductor")
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "2"
        compile_rank(ready_file)
    world = WORLD[mode]
    env = dict(os.environ, WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), LOCAL_WORLD_SIZE=str(world))
    children = []
    for rank in range(world):
        child_env = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        children.append(subprocess.Popen(
            [sys.executable, __file__, "--rank", mode, ready_file, workdir], env=child_env))
    ready(ready_file, "launcher")
    if mode == "missing_unreaped":
        for child in children:
            child.wait()  # in rank order: rank 3's exit stays unreaped (a zombie) behind rank 0
        return
    pending = {child.pid for child in children}
    while pending:  # reap whichever rank exits first, as torchrun's agent does
        pid, _ = os.wait()
        pending.discard(pid)


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(*sys.argv[2:5])
    else:
        launch(*sys.argv[1:4])
