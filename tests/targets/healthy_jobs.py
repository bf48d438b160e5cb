"""Healthy jobs that look hung to a naive look: one works while the others wait, a service
with nobody to serve, a job between two phases; and their hung twins.

    python healthy_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE once it is in the state it stays in.
Modes:

- ``vocab``     (slow) three gloo ranks; rank 1 builds a vocabulary (n-gram counts through
                helper functions, a JSON checkpoint every few thousand lines, a progress
                line) while ranks 0 and 2 wait in ``all_reduce`` for it: the
                ``main_process_first`` shape of LongLoRA#45 / axolotl#2684, on another rank
                and another collective.
- ``spin``      (hung twin) the same job, but rank 1 spins in one loop of one function, no
                call and no I/O (a padding loop that never terminates).
- ``asyncio_pool`` (idle) an asyncio TCP server idle in ``serve_forever`` with a pool of forked
                worker processes, each blocked reading its own task pipe
                (``multiprocessing.SimpleQueue``) from the server; nobody connects (the
                idle-pool shape of pbench#698).
- ``asyncio_lost`` (hung twin) the same service, and a client process that sent a request
                the server never answers (it drops it): the client waits for a reply.
- ``phases``    (paused) a coordinator ran phase one on two forked workers through one
                ``multiprocessing.Queue``, then sleeps before phase two (a rate-limit
                window); the workers wait for their next task (one in the queue's pipe, one
                for its read lock).
- ``ticks``     (progressing) a feed process sends a 4-byte tick over a socketpair every 20 ms
                (``send``) and a consumer takes each (``recv``): both sleep on one line and
                wake 50 times a second, and ``/proc/PID/io`` counts none of their bytes.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


# -- a rank that works (or spins) while the others wait in a collective ----------------------

def _ngrams(line: str, n: int) -> list[str]:
    words = line.split()
    return [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]


def _count(vocab: dict[str, int], grams: list[str]) -> None:
    for gram in grams:
        vocab[gram] = vocab.get(gram, 0) + 1


def _checkpoint(vocab: dict[str, int], path: str) -> None:
    with open(path, "w") as f:
        json.dump(sorted(vocab.items())[:20000], f)


def build_vocab(ready_file: str, tag: str) -> None:
    vocab: dict[str, int] = {}
    ready(ready_file, tag)
    for i in range(10**9):
        line = " ".join(f"w{(i * 7 + k * 13) % 997}" for k in range(24))
        for n in (1, 2, 3):
            _count(vocab, _ngrams(line, n))
        if i % 3000 == 0:
            _checkpoint(vocab, "vocab.json")
            print(f"lines {i} vocab {len(vocab)}", flush=True)


def pad_forever(ready_file: str, tag: str) -> None:
    length = 37
    ready(ready_file, tag)
    while length % 8:  # 37 + 16k is never a multiple of 8
        length += 16
        length %= 1 << 20


def rank_main(mode: str, ready_file: str) -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    dist.barrier()
    if rank == 1:
        (build_vocab if mode == "vocab" else pad_forever)(ready_file, f"rank{rank}")
    else:
        ready(ready_file, f"rank{rank}")
    dist.all_reduce(torch.ones(8))


def ranks(mode: str, ready_file: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = [subprocess.Popen(
        [sys.executable, __file__, f"{mode}_rank", ready_file, "."],
        env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="3",
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1"))
        for r in range(3)]
    ready(ready_file, "launcher")
    for proc in procs:
        proc.wait()


# -- an idle service: an asyncio server and its pool of workers ------------------------------

def _worker(tasks: mp.SimpleQueue | mp.Queue, results: mp.SimpleQueue, ready_file: str,
            n: int) -> None:
    ready(ready_file, f"worker{n}")
    while True:
        task = tasks.get()  # the next task from the server
        results.put(task.upper())


async def _serve(ready_file: str, answer: bool, port_file: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readline()
        if answer:
            writer.write(request)
            await writer.drain()
        # else the request is dropped: the connection stays open, no reply ever comes

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    ready(ready_file, "server")
    async with server:
        await server.serve_forever()


def _client(port_file: str, ready_file: str) -> None:
    while not os.path.exists(port_file):
        time.sleep(0.05)
    with open(port_file) as f:
        port = int(f.read())
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(b"score this\n")
        ready(ready_file, "client")
        conn.recv(1024)  # the reply never comes


def service(ready_file: str, lost: bool) -> None:
    ctx = mp.get_context("fork")
    results: mp.SimpleQueue = ctx.SimpleQueue()
    pool = []
    for n in range(2):
        tasks: mp.SimpleQueue = ctx.SimpleQueue()
        worker = ctx.Process(target=_worker, args=(tasks, results, ready_file, n), daemon=True)
        worker.start()
        pool.append((tasks, worker))
    port_file = os.path.abspath("port")
    if lost:
        ctx.Process(target=_client, args=(port_file, ready_file), daemon=True).start()
    asyncio.run(_serve(ready_file, not lost, port_file))


# -- a job between two phases ----------------------------------------------------------------

def phases(ready_file: str) -> None:
    ctx = mp.get_context("fork")
    results: mp.SimpleQueue = ctx.SimpleQueue()
    # One queue both workers read: one of them reads its pipe holding the queue's read lock,
    # the other waits for that lock.
    tasks: mp.Queue = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(tasks, results, ready_file, n), daemon=True)
               for n in range(2)]
    for worker in workers:
        worker.start()
    for _ in workers:  # phase one
        tasks.put("phase one")
    done = [results.get() for _ in workers]
    print(f"phase one: {done}; next phase in an hour", flush=True)
    ready(ready_file, "coordinator")
    time.sleep(3600)  # the quota window
    for _ in workers:
        tasks.put("phase two")


# -- a driver polling a worker that computes ---------------------------------------------------

def _augment(conn: object, ready_file: str) -> None:
    ready(ready_file, "worker")
    total = 0
    for i in range(10**10):  # minutes of pure Python per item
        total += (i * i) % 7
    conn.send(total)  # type: ignore[attr-defined]


class _Augmented:
    def __init__(self, ready_file: str) -> None:
        self.ready_file = ready_file

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> int:
        ready(self.ready_file, "worker")
        total = 0
        for k in range(10**10):  # minutes of pure Python per item
            total += (k * k) % 7
        return total


def cpu_loader(ready_file: str) -> None:
    from torch.utils.data import DataLoader

    ready(ready_file, "main")
    for batch in DataLoader(_Augmented(ready_file), num_workers=1):  # type: ignore[arg-type]
        print(batch, flush=True)


def polled_worker(ready_file: str) -> None:
    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe()
    ctx.Process(target=_augment, args=(theirs, ready_file), daemon=True).start()
    ready(ready_file, "driver")
    while not mine.poll(0.05):  # the trainer's loop, polling for its batch
        pass
    print(mine.recv(), flush=True)


# -- a consumer of a socket's ticks ---------------------------------------------------------


def ticks(ready_file: str) -> None:
    mine, theirs = socket.socketpair()
    if os.fork() == 0:
        mine.close()
        ready(ready_file, "feed")
        while True:
            theirs.send(b"tick")  # send(2): /proc/PID/io counts only read/write
            time.sleep(0.02)
    theirs.close()
    ready(ready_file, "consumer")
    while True:
        mine.recv(64)


MODES = {"vocab": lambda r: ranks("vocab", r), "spin": lambda r: ranks("spin", r),
         "vocab_rank": lambda r: rank_main("vocab", r), "spin_rank": lambda r: rank_main("spin", r),
         "asyncio_pool": lambda r: service(r, lost=False),
         "asyncio_lost": lambda r: service(r, lost=True), "phases": phases,
         "polled_worker": polled_worker, "cpu_loader": cpu_loader, "ticks": ticks}

if __name__ == "__main__":
    mode, ready_file, workdir = sys.argv[1:4]
    os.chdir(workdir)
    MODES[mode](ready_file)
