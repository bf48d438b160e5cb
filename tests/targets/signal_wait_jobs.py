"""Real jobs whose main process sleeps in ``signal.pause()`` for a child's SIGCHLD.

    python signal_wait_jobs.py MODE READY_FILE WORKDIR

The ``render-supervisor`` starts one ``encoder`` child (a shell command) and two ``uploader``
workers that block reading a pipe the supervisor writes once the encoder is done; it then
waits for the encoder's SIGCHLD in ``signal.pause()``. Each process appends ``"<pid> <tag>"``
to READY_FILE when it is where it stays. Modes:

- ``missed``  the encoder exits before the supervisor installs its SIGCHLD handler (it checks
              with ``waitid(WNOWAIT)``, which leaves the child a zombie): the signal is gone,
              ``pause()`` sleeps for ever and the uploaders with it (hung).
- ``running`` the encoder is still running (it sleeps): its exit will signal the
              supervisor; nothing is lost yet.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import setproctitle


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def uploader(read_end: int, index: int, ready_file: str) -> None:
    setproctitle.setproctitle("uploader")
    ready(ready_file, f"uploader{index}")
    os.read(read_end, 1)


def main() -> None:
    mode, ready_file = sys.argv[1], sys.argv[2]
    setproctitle.setproctitle("render-supervisor")
    writes = []
    for index in range(2):
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(w)
            uploader(r, index, ready_file)
            os._exit(0)
        os.close(r)
        writes.append(w)
    encoder = subprocess.Popen(["sh", "-c", "exit 0" if mode == "missed" else "sleep 3600"])
    if mode == "missed":  # until it exited, without reaping it
        os.waitid(os.P_PID, encoder.pid, os.WEXITED | os.WNOWAIT)
    done = []
    signal.signal(signal.SIGCHLD, lambda *_: done.append(os.waitpid(encoder.pid, 0)))
    ready(ready_file, "supervisor")
    while not done:
        signal.pause()
    for w in writes:
        os.write(w, b"go")


if __name__ == "__main__":
    main()
