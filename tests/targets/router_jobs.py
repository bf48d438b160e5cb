"""A real router whose worker's reply sits in the worker's stdout buffer.

    python router_jobs.py MODE READY_FILE WORKDIR

Mode ``buffered`` (deno#22767's shape, a router talking to workers over their stdin and
stdout): the router starts 2 worker processes with pipes for stdin and stdout, the first with
``python -u``, the second without (and without PYTHONUNBUFFERED), sends each one request line
and waits in ``select()`` for the replies. Both workers answer with print() and go back to
``for line in sys.stdin:``; the second's reply stays in its block-buffered stdout. The router
appends ``"<pid> router"`` to READY_FILE once the first reply has come; each worker appends
its own line once it has printed its reply.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys


def worker(index: str, ready_file: str) -> None:
    for line in sys.stdin:
        print(f"{index}:{len(line)}")  # no flush: block-buffered on a pipe without -u
        with open(ready_file, "a") as f:
            f.write(f"{os.getpid()} worker{index}\n")


def main(ready_file: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    workers = []
    for i, flags in enumerate((["-u"], [])):
        workers.append(subprocess.Popen(
            [sys.executable, *flags, __file__, "--worker", str(i), ready_file],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env))
    for w in workers:
        assert w.stdin is not None
        w.stdin.write(b'{"text": "hello world"}\n')
        w.stdin.flush()
    waiting = {w.stdout.fileno(): w for w in workers if w.stdout is not None}
    told = False
    while waiting:
        readable, _, _ = select.select(list(waiting), [], [])
        for fd in readable:
            os.read(fd, 4096)
            del waiting[fd]
        if not told:
            with open(ready_file, "a") as f:
                f.write(f"{os.getpid()} router\n")
            told = True


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[2])
