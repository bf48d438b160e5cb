"""Real gloo jobs whose rank 0 runs an operator console (``cmd.Cmd``) on a FIFO that stands in
for its terminal.

    python prompt_jobs.py MODE READY_FILE WORKDIR

The launcher makes WORKDIR/console (a FIFO), opens its write end (to answer the console) and
forks 3 ranks, which inherit it; rank 0 reads its console commands from the FIFO's read end. Each
step, rank 0 asks its console what to do, then every rank enters ``barrier``. Each process
appends ``"<pid> <tag>"`` to READY_FILE before its last call. Modes:

- ``unanswered`` nobody writes a command: rank 0 waits at its console prompt, ranks 1-2 wait
                 in barrier for it (hung; every rank holds the write end, none writes).
- ``answered``   the launcher writes ``step`` to the console every 20 ms: every rank goes round
                 its steps (healthy).
"""

from __future__ import annotations

import cmd
import contextlib
import datetime
import os
import sys
import time

from env_rank_jobs import WORLD, fork_ranks
from hang_shapes import free_port, ready


class Console(cmd.Cmd):
    """What rank 0 asks before each step: ``step`` goes on."""

    prompt = "(train) "
    use_rawinput = False

    def do_step(self, _: str) -> bool:
        return True


def rank_main(rank: int, port: int, console: str, ready_file: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    dist.barrier()  # everyone joined
    commands = open(console) if rank == 0 else None  # noqa: SIM115 (read for the job's life)
    ready(ready_file, f"rank{rank}")
    while True:
        if commands is not None:
            Console(stdin=commands, stdout=sys.stdout).cmdloop()
        dist.barrier()


def launch(mode: str, ready_file: str, workdir: str) -> None:
    console = os.path.join(workdir, "console")
    os.mkfifo(console)
    reader = os.open(console, os.O_RDONLY | os.O_NONBLOCK)  # so the write end opens at once
    answers = os.open(console, os.O_WRONLY)
    os.close(reader)
    ranks = fork_ranks(rank_main, ready_file, free_port(), console, ready_file)
    if mode == "answered":
        while True:
            with contextlib.suppress(BrokenPipeError):  # rank 0 has not opened it yet
                os.write(answers, b"step\n")
            time.sleep(0.02)
    while ranks:
        ranks.pop().join()


if __name__ == "__main__":
    launch(*sys.argv[1:4])
