"""Real jobs whose ranks finish, all but one, which cannot exit.

    python finish_jobs.py MODE READY_FILE WORKDIR

A Python launcher starts 3 ranks (``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/``MASTER_*`` in their
environment, as torchrun gives them). Each rank does its step and returns from ``main``; rank 2
has started a non-daemon ``uploader`` thread that sends its results from a ``queue.Queue``.
Each process appends ``"<pid> <tag>"`` to READY_FILE where it stays. Modes:

- ``zombie``   rank 2's main returns without putting the queue's end marker: ``threading._shutdown``
               joins ``uploader``, which waits in ``Queue.get`` for ever. The launcher waits for its
               ranks last to first, so ranks 0-1 stay unreaped with exit code 0 (hung).
- ``reaped``   rank 2's main returns while a non-daemon ``multiprocessing`` child (its ``spooler``)
               waits on an Event nobody sets: multiprocessing's exit hook joins it for ever. The
               launcher polls every rank (torchrun's way), so ranks 0-1 are reaped (hung).
- ``draining`` as ``zombie``, but the end marker is there: ``uploader`` works through a long
               backlog (hashing each item, appending it to a spool file), then ends
               (healthy: rank 2 is about to exit).
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import queue
import subprocess
import sys
import threading
import time

from hang_shapes import free_port, ready


def send_result(item: bytes, spool: str) -> None:
    digest = item
    for _ in range(200):
        digest = hashlib.sha256(digest).digest()
    with open(spool, "ab") as out:
        out.write(digest.hex().encode() + b"\n")


def upload_loop(results: queue.Queue[bytes | None], spool: str) -> None:
    while True:
        item = results.get()
        if item is None:
            return
        send_result(item, spool)


def spool_forever(flushed: object) -> None:
    flushed.wait()  # type: ignore[attr-defined]


def rank_main(mode: str, ready_file: str, workdir: str) -> None:
    rank = int(os.environ["RANK"])
    total = sum(i * i for i in range(10000))  # the rank's step
    if rank != 2:
        ready(ready_file, f"rank{rank}")
        return
    if mode == "reaped":
        spooler = mp.get_context("fork").Process(target=spool_forever, args=(mp.Event(),),
                                                 name="spooler")
        spooler.start()
        ready(ready_file, "rank2")
        return  # multiprocessing's exit hook joins the spooler, which never ends
    results: queue.Queue[bytes | None] = queue.Queue()
    spool = os.path.join(workdir, "results.spool")
    uploader = threading.Thread(target=upload_loop, args=(results, spool), name="uploader")
    uploader.start()
    backlog = 400_000 if mode == "draining" else 3
    for i in range(backlog):
        results.put(str(total + i).encode())
    if mode == "draining":
        results.put(None)
    ready(ready_file, "rank2")
    # main returns: threading._shutdown joins the non-daemon uploader


def launch(mode: str, ready_file: str, workdir: str) -> None:
    port = str(free_port())
    children = []
    for r in range(3):  # torchrun's variables, one rank each
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="3",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        children.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--rank", mode, ready_file, workdir],
            env=env))
    ready(ready_file, "launcher")
    if mode == "reaped":  # torchrun's agent: poll every worker until all are done
        while any(child.poll() is None for child in children):
            time.sleep(0.1)
        return
    for child in reversed(children):  # the last rank first: the others wait unreaped
        child.wait()


if __name__ == "__main__":
    args = sys.argv[1:]
    (rank_main if args[0] == "--rank" else launch)(*[a for a in args if a != "--rank"][:3])
