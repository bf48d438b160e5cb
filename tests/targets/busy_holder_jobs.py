"""A coordinator waits for a builder that computes, through a pipe end its workers inherited.

    python busy_holder_jobs.py MODE READY_FILE WORKDIR

An ``index-coordinator`` process opens a duplex ``multiprocessing.Pipe`` to an
``index-builder`` child, then forks two ``index-shard`` workers, which inherit the builder's
end too (the coordinator never closed it), and waits on its end for the built index. The
builder hashes for minutes before it answers; the workers wait for their shard on a
``multiprocessing.Queue`` the coordinator fills after. Each process appends ``"<pid> <tag>"``
to READY_FILE when it is where it stays. Mode ``slow``: the job is slow, not hung: the
workers hold the builder's end, and the wait loops through them in the fd graph, but the
builder, which holds it too, is working.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import sys

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def build(conn: object, ready_file: str) -> None:
    setproctitle.setproctitle("index-builder")
    ready(ready_file, "builder")
    digest = b"seed"
    for _ in range(10**9):  # minutes of work before the answer
        digest = hashlib.sha256(digest).digest()
    conn.send(digest)  # type: ignore[attr-defined]


def shard(queue: object, ready_file: str) -> None:
    setproctitle.setproctitle("index-shard")
    ready(ready_file, "shard")
    queue.get()  # type: ignore[attr-defined]


def main() -> None:
    ready_file = sys.argv[2]
    setproctitle.setproctitle("index-coordinator")
    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe()
    ctx.Process(target=build, args=(theirs, ready_file), daemon=True).start()
    queue = ctx.Queue()
    for _ in range(2):  # forked with ``theirs`` still open: they inherit the builder's end
        ctx.Process(target=shard, args=(queue, ready_file), daemon=True).start()
    ready(ready_file, "coordinator")
    index = mine.recv()
    for _ in range(2):
        queue.put(index)


if __name__ == "__main__":
    main()
