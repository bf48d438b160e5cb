"""Real gloo jobs where a collective waits on a rank that waits on something else.

    python collective_waits.py MODE READY_FILE WORKDIR

A launcher starts 3 ranks as torchrun would (RANK/WORLD_SIZE in the environment); each
process appends ``"<pid> <tag>"`` to READY_FILE right before it blocks for good. Modes, each
the mechanism of a real report (the tests cite it):

- ``writer_stuck`` every rank forks an async checkpoint writer that takes shards from a bounded
                   ``multiprocessing.Queue``; rank 1's writer first waits for a manifest on a
                   pipe nobody writes, so rank 1 blocks putting its second shard into the full
                   queue; ranks 0 and 2 (their writers idle on their queues) wait in
                   ``all_reduce``.
- ``snapshot_lock`` every rank runs a snapshot thread that holds the rank's state lock (handed
                   to it as an attribute) across an ``all_gather`` of the replicas' digests on
                   a group of its own, while the main thread holds the same lock across the
                   gradient ``all_reduce``; on rank 0 the snapshot thread takes the lock first,
                   on the others the main thread does: each rank's collective waits for a
                   thread of another rank that waits for its lock (KempnerForge#104,
                   torchcomms#586; blind round 36's 03).
- ``lock_cycle``   rank 0 takes an exclusive ``flock`` on the run's index and, still holding it,
                   enters ``barrier``; rank 1 asks its uploader child (over a socketpair) for
                   the index, and the uploader blocks taking that flock; rank 2 waits in
                   ``barrier``.
"""

from __future__ import annotations

import datetime
import fcntl
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading

from hang_shapes import free_port, ready  # the same launcher's handshake, one home

WORLD = 3


def writer(shards: object, stuck: bool, ready_file: str, rank: int) -> None:
    if stuck:
        r, _w = os.pipe()
        ready(ready_file, f"writer{rank}")
        os.read(r, 1)  # the manifest that never comes
    else:
        ready(ready_file, f"writer{rank}")
    while True:
        shards.get()  # type: ignore[attr-defined]


def uploader(conn: socket.socket, index: str, ready_file: str) -> None:
    conn.recv(16)  # a request for the index
    fd = os.open(index, os.O_RDWR | os.O_CREAT, 0o644)
    ready(ready_file, "uploader")
    fcntl.flock(fd, fcntl.LOCK_SH)
    conn.sendall(b"ok")


class Snapshotter(threading.Thread):
    """Digests the replica's state under its lock and compares it with the other ranks'."""

    def __init__(self, state: object, state_lock: threading.Lock, group: object,
                 first: bool, holding: threading.Event) -> None:
        super().__init__(name="snapshotter", daemon=True)
        self.state, self.state_lock, self.group = state, state_lock, group
        self.first, self.holding = first, holding

    def run(self) -> None:
        import torch
        import torch.distributed as dist

        if not self.first:
            self.holding.wait()  # the main thread took the lock first on this rank
        with self.state_lock:
            self.holding.set()
            digest = self.state.sum().reshape(1)  # type: ignore[attr-defined]
            digests = [torch.zeros(1) for _ in range(dist.get_world_size())]
            dist.all_gather(digests, digest, group=self.group)


def snapshot_lock(ready_file: str) -> None:
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    snap_group = dist.new_group(backend="gloo")
    state, state_lock, holding = torch.ones(4), threading.Lock(), threading.Event()
    Snapshotter(state, state_lock, snap_group, rank == 0, holding).start()
    if rank == 0:
        holding.wait()  # the snapshot thread took the lock first on this rank
    ready(ready_file, f"rank{rank}")
    with state_lock:  # no snapshot may copy half-updated weights
        holding.set()
        dist.all_reduce(state)


def rank_main(mode: str, ready_file: str, workdir: str) -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    index = os.path.join(workdir, "index.lock")
    ctx = mp.get_context("fork")
    helper = None
    if mode == "writer_stuck":
        shards = ctx.Queue(maxsize=1)
        helper = ctx.Process(target=writer, args=(shards, rank == 1, ready_file, rank))
    else:
        mine, theirs = socket.socketpair()
        if rank == 1:
            helper = ctx.Process(target=uploader, args=(theirs, index, ready_file))
    if helper is not None:
        helper.start()
    dist.init_process_group("gloo", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(hours=1))
    t = torch.ones(4)
    if mode == "snapshot_lock":
        snapshot_lock(ready_file)
        return
    if mode == "writer_stuck":
        if rank == 1:
            shards.put(b"shard-0")
            ready(ready_file, f"rank{rank}")
            shards.put(b"shard-1")  # the queue is full and its writer never takes
        ready(ready_file, f"rank{rank}")
        dist.all_reduce(t)
        return
    if rank == 0:
        fd = os.open(index, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
    dist.barrier()  # everyone has the group; rank 0 holds the index
    if rank == 1:
        mine.sendall(b"index?")
        ready(ready_file, f"rank{rank}")
        mine.recv(16)
    ready(ready_file, f"rank{rank}")
    dist.barrier()


def launch(mode: str, ready_file: str, workdir: str) -> None:
    os.makedirs(workdir, exist_ok=True)
    env = dict(os.environ, WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), LOCAL_WORLD_SIZE=str(WORLD))
    children = [subprocess.Popen([sys.executable, __file__, "--rank", mode, ready_file, workdir],
                                 env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
                for r in range(WORLD)]
    ready(ready_file, "launcher")
    for child in children:
        child.wait()


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(*sys.argv[2:5])
    else:
        launch(*sys.argv[1:4])
