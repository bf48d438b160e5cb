"""Real jobs whose verdicts the bundled demos do not reach, recorded by tests/fixtures/record.py.

    python rule_jobs.py MODE READY_FILE

Each process appends ``"<pid> <tag>"`` to READY_FILE once it is where it stays. Modes:

- ``progressing``  one process that computes in three functions in turn, ~0.25 s each: its
                   Python stack changes between any two samples of a 2 s window.
- ``apart``        a launcher with two multiprocessing children that stay put in different
                   places (one sleeps, one reads a pipe nobody writes): stuck, but neither a
                   collective nor one shared signature.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _spin(seconds: float) -> int:
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def tokenize_batch() -> int:
    return _spin(0.25)


def forward_pass() -> int:
    return _spin(0.25)


def write_checkpoint() -> int:
    return _spin(0.25)


def progressing(ready_file: str) -> None:
    tokenize_batch()
    ready(ready_file, "progressing")
    while True:
        tokenize_batch()
        forward_pass()
        write_checkpoint()


def nap(ready_file: str) -> None:
    ready(ready_file, "sleeper")
    time.sleep(3600)


def read_reply(ready_file: str, fd: int) -> None:
    ready(ready_file, "reader")
    os.read(fd, 1)  # the writer end is held, unused, by the launcher: blocks forever


def apart(ready_file: str) -> None:
    read_end, write_end = os.pipe()
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=nap, args=(ready_file,), daemon=True),
                ctx.Process(target=read_reply, args=(ready_file, read_end), daemon=True)]
    for child in children:
        child.start()
    for child in children:
        child.join()
    os.close(write_end)


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    {"progressing": progressing, "apart": apart}[mode](ready_file)


if __name__ == "__main__":
    main()
