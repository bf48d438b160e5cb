"""A script whose top level takes a cache lock, and whose main block starts a spawned child
while it holds it (nicegui#6166; blind round 41's 06):

    python spawn_rerun.py READY_FILE WORKDIR

The child, started by spawn, imports this script again as ``__mp_main__`` before it runs its
target, so the top-level ``with FileLock(...)`` runs again there and polls the lock its
parent holds; the parent holds it while it writes the child's start-up data (its target's
arguments, 1 MiB: more than a pipe holds), which the child reads only after its re-run. A
deadlock whose cause is the child's re-run of the script: the fix is the main guard.

READY_FILE gets ``"<pid> parent"`` before the parent starts the child, and ``"<pid> child"``
from the child's re-run, just before it takes the lock.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys

from filelock import FileLock


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def build(records: bytes) -> int:
    return len(records)


READY, WORKDIR = sys.argv[1], sys.argv[2]
os.makedirs(WORKDIR, exist_ok=True)
if __name__ != "__main__":
    ready(READY, "child")
with FileLock(os.path.join(WORKDIR, "cache.lock")):  # the script's top level: run by both
    if __name__ == "__main__":
        ready(READY, "parent")
        child = mp.get_context("spawn").Process(target=build, args=(b"x" * (1 << 20),))
        child.start()  # blocks writing the 1 MiB start-up data: the child is in its re-run
        child.join()
