"""One process whose main thread blocks for good, off CPU from then on (issue 20 item 4).

    python off_cpu_jobs.py MODE READY_FILE WORKDIR

``pipe``: ``os.read`` of a pipe whose write end it holds and never writes. ``lock``: a
``threading.Lock`` acquired a second time by its holder. ``far``: ``Event.wait(600)``, a
futex wait whose deadline is minutes away. ``timed``: ``Event.wait(3)`` again and again, a
deadline every 3 s. ``writer``: ``pipe``, while a native thread (faulthandler's
watchdog, no Python frames) writes a traceback to a file ten times a second. Appends
``"<pid> main"`` to READY_FILE just before it blocks; the test then waits until the kernel
says the thread has not run for as long as it needs.
"""

from __future__ import annotations

import os
import sys
import threading


def ready(path: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} main\n")


def pipe(ready_file: str) -> None:
    read_end, write_end = os.pipe()
    ready(ready_file)
    os.read(read_end, 1)  # nobody writes: write_end stays open here
    print(write_end)


def lock(ready_file: str) -> None:
    held = threading.Lock()
    held.acquire()
    ready(ready_file)
    held.acquire()  # its own holder: never released


def far(ready_file: str) -> None:
    ready(ready_file)
    threading.Event().wait(600)  # nobody sets it: wakes only at its deadline


def timed(ready_file: str) -> None:
    ready(ready_file)
    while True:  # a poll every 3 s of something that never comes
        threading.Event().wait(3)


def writer(ready_file: str) -> None:
    import faulthandler

    log = open("tracebacks.log", "w")  # noqa: SIM115 - the watchdog writes to it until killed
    faulthandler.dump_traceback_later(0.1, repeat=True, file=log)
    pipe(ready_file)


MODES = {"pipe": pipe, "lock": lock, "far": far, "timed": timed, "writer": writer}

if __name__ == "__main__":
    mode, ready_file, workdir = sys.argv[1:4]
    os.chdir(workdir)
    MODES[mode](ready_file)
