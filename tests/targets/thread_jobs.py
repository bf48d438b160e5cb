"""Real jobs whose threads block each other through a pool, a logging handler or the GIL.

    python thread_jobs.py MODE READY_FILE WORKDIR

Each process appends ``"<pid> <tag>"`` to READY_FILE once it is where it stays (the handshake
of tests/support.py ``running_target``). Modes, each the mechanism of a real report (the tests
cite it):

- ``pool_abba``  a ledger served by a 4-thread ThreadPoolExecutor: one task takes
                 ``accounts_lock`` then ``audit_lock``, another ``audit_lock`` then
                 ``accounts_lock``; two more tasks queue on those locks; the main thread
                 waits on the first task's result.
- ``log_pipe``   a collector starts a child with stdout and stderr piped and reads only its
                 stdout; the child's threads log to a StreamHandler on stderr until the pipe is
                 full: one thread blocks in write(2) holding the handler's lock, the others
                 (the main thread, before its next stdout line) wait on that lock.
- ``gil_pipe``   a forked child reads a pipe through ``ctypes.PyDLL`` (the GIL stays held);
                 the pipe's only writer is the child's own thread, which cannot take the GIL
                 back after its sleep; the parent waits on the child's result pipe.
"""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MODE, READY, WORKDIR = sys.argv[1], sys.argv[2], Path(sys.argv[3])


def ready(tag: str) -> None:
    with open(READY, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


# -- pool_abba -------------------------------------------------------------------------


class Ledger:
    def __init__(self) -> None:
        self.accounts_lock = threading.Lock()
        self.audit_lock = threading.Lock()
        self.both_in = threading.Barrier(2)
        self.balances = {"a": 10}
        self.trail: list[str] = []

    def transfer(self) -> None:
        with self.accounts_lock:
            self.both_in.wait(timeout=30)
            with self.audit_lock:
                self.trail.append("transfer")

    def audit(self) -> None:
        with self.audit_lock:
            self.both_in.wait(timeout=30)
            with self.accounts_lock:
                self.trail.append(str(self.balances))

    def balance(self) -> int:
        with self.accounts_lock:
            return self.balances["a"]

    def note(self) -> None:
        with self.audit_lock:
            self.trail.append("note")


def pool_abba() -> None:
    ledger = Ledger()
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ledger")
    first = pool.submit(ledger.transfer)
    pool.submit(ledger.audit)
    time.sleep(0.3)  # both hold their first lock: the two that follow queue behind them
    pool.submit(ledger.balance)
    pool.submit(ledger.note)
    time.sleep(0.3)
    ready("ledger")
    first.result()


# -- log_pipe --------------------------------------------------------------------------


def log_pipe() -> None:
    child = subprocess.Popen([sys.executable, __file__, "log_child", READY, str(WORKDIR)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ready("collector")
    assert child.stdout is not None
    for _line in child.stdout:  # stderr is read "after it exits": never
        pass


def log_child() -> None:
    log = logging.getLogger("sim")
    log.addHandler(logging.StreamHandler(sys.stderr))
    log.setLevel(logging.DEBUG)
    chunk = "x" * 4000

    def simulate(n: int) -> None:
        while True:
            log.debug("step %d %s", n, chunk)

    for n in range(3):
        threading.Thread(target=simulate, args=(n,), name=f"sim-{n}", daemon=True).start()

    def announce() -> None:  # a 64 KiB pipe fills in milliseconds; then everyone is stuck
        time.sleep(1.0)
        ready("child")

    threading.Thread(target=announce, name="announce").start()
    time.sleep(0.5)
    while True:
        log.info("progress")
        print("progress", flush=True)


# -- gil_pipe --------------------------------------------------------------------------


def gil_pipe() -> None:
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(result_r)
        gil_child(result_w)
        os._exit(0)
    os.close(result_w)
    ready("parent")
    os.read(result_r, 16)
    os.waitpid(pid, 0)


def gil_child(result_w: int) -> None:
    frames_r, frames_w = os.pipe()
    libc = ctypes.PyDLL(None)  # PyDLL: calls keep the GIL

    def pump() -> None:
        time.sleep(0.2)  # returns, then waits for the GIL the reader never lets go
        os.write(frames_w, b"frame")

    threading.Thread(target=pump, name="pump").start()
    buf = ctypes.create_string_buffer(64)
    ready("child")
    libc.read(frames_r, buf, 64)
    os.write(result_w, buf.value)


MODES = {"pool_abba": pool_abba, "log_pipe": log_pipe, "log_child": log_child,
         "gil_pipe": gil_pipe}

if __name__ == "__main__":
    WORKDIR.mkdir(parents=True, exist_ok=True)
    MODES[MODE]()
