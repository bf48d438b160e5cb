"""A real job whose worker is held in a ptrace stop by its own native-sampler child.

    python traced_jobs.py MODE READY_FILE WORKDIR

The ``render-worker`` reads reports from its ``frame-sampler`` child on a pipe (a reader
thread). The sampler ``PTRACE_ATTACH``es every thread of the worker, then writes a 256 KiB
report to that pipe before it detaches: the pipe fills (64 KiB), the reader that would drain
it is stopped, and the sampler never gets to detach. Each process appends ``"<pid> <tag>"`` to
READY_FILE when it is where it stays. Mode ``stuck`` only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import setproctitle

SAMPLER = r"""
import ctypes, os, sys, setproctitle
setproctitle.setproctitle("frame-sampler")
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
target, ready_file = int(sys.argv[1]), sys.argv[2]
tids = [int(t) for t in os.listdir(f"/proc/{target}/task")]
for tid in tids:
    if libc.ptrace(16, tid, None, None) != 0:  # PTRACE_ATTACH
        sys.exit(f"attach {tid}: errno {ctypes.get_errno()}")
    os.waitpid(tid, 0x40000000)  # __WALL: until it stops
with open(ready_file, "a") as f:
    f.write(f"{os.getpid()} sampler\n")
sys.stdout.buffer.write(b"x" * (256 * 1024))
sys.stdout.buffer.flush()
for tid in tids:
    libc.ptrace(17, tid, None, None)  # PTRACE_DETACH
"""


def main() -> None:
    ready_file = sys.argv[2]
    setproctitle.setproctitle("render-worker")
    sampler = subprocess.Popen([sys.executable, "-c", SAMPLER, str(os.getpid()), ready_file],
                               stdout=subprocess.PIPE)
    with open(ready_file, "a") as f:
        f.write(f"{os.getpid()} worker\n")

    def reader() -> None:
        assert sampler.stdout is not None
        while sampler.stdout.read(65536):
            pass

    threading.Thread(target=reader, name="report-reader").start()
    sampler.wait()


if __name__ == "__main__":
    main()
