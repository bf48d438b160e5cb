"""Workers parked on a multiprocessing Condition while their coordinator sleeps between phases.

    python parked_jobs.py MODE READY_FILE WORKDIR

A ``rollout-coordinator`` starts three ``rollout-worker`` children that wait on a shared
``multiprocessing.Condition`` for the next phase, then sleeps 10 minutes (a cool-down between
evaluation phases) before it notifies them. Each process appends ``"<pid> <tag>"`` to
READY_FILE when it is where it stays. Modes, both a healthy pause, not a hang:

- ``paused``  the coordinator sleeps 10 minutes.
- ``drain``   the coordinator polls an operator's DRAIN file every 2.5 s (a maintenance
              window), longer than the dump's window: it wakes once at most in it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def worker(phase: object, ready_file: str) -> None:
    setproctitle.setproctitle("rollout-worker")
    with phase:  # type: ignore[attr-defined]
        ready(ready_file, "worker")
        phase.wait()  # type: ignore[attr-defined]


def main() -> None:
    ready_file = sys.argv[2]
    setproctitle.setproctitle("rollout-coordinator")
    ctx = mp.get_context("fork")
    phase = ctx.Condition()
    for _ in range(3):
        ctx.Process(target=worker, args=(phase, ready_file), daemon=True).start()
    drain = os.path.join(sys.argv[3], "DRAIN")
    open(drain, "w").close()
    ready(ready_file, "coordinator")
    if sys.argv[1] == "drain":
        while os.path.exists(drain):  # the operator removes it when the window ends
            time.sleep(2.5)
    else:
        time.sleep(600)  # the cool-down between phases
    with phase:
        phase.notify_all()


if __name__ == "__main__":
    main()
