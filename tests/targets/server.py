"""A small SGLang-shaped job for the findings tests: a launcher and titled scheduler workers.

The launcher spawns ``--workers`` processes titled ``sglang::scheduler_TP<i>`` (fewer than
``--tp-size`` when asked to), binds ``--port`` only with ``--bind``, and then waits forever.
Optional misbehaviour, each on request:

* ``--zombie CODE``: a forked child exits with CODE and is never reaped (``<defunct>``);
* ``--log-dir DIR``: worker 0 writes its stdout/stderr to ``DIR/rank0.log``, with a traceback,
  a CUDA error and a line holding a secret (which hangscope must redact);
* ``--reserve-factor F``: the last worker maps F x MemTotal of address space with
  ``PROT_NONE | MAP_NORESERVE`` (reserved, never used);
* ``--compiler``: the last worker runs a child whose argv[0] is ``ptxas`` (a ``sleep``).

Readiness: each worker appends ``"<pid> worker<i>"`` to ``--ready-file`` once set up, and the
launcher appends ``"<pid> launcher"`` once its own setup (port, zombie) is done.
No torch: the job starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import mmap
import os
import signal
import socket
import subprocess
import sys
import time


def mark_ready(path: str, what: str) -> None:
    with open(path, "a") as fh:
        fh.write(f"{os.getpid()} {what}\n")


def mem_total() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def worker(args: argparse.Namespace) -> None:
    from setproctitle import setproctitle

    setproctitle(f"sglang::scheduler_TP{args.worker}")
    keep = []
    if args.log_dir and args.worker == 0:
        print("[TP0] Load weight begin. avail mem=78.50 GB", flush=True)
        print("[TP0] Init torch distributed begin.", flush=True)
        print("[TP0] connecting to hub with token=hf_abcdefghijklmnopqrstuvwxyz0123456789",
              flush=True)
        print("Traceback (most recent call last):", file=sys.stderr, flush=True)
        print('  File "model_runner.py", line 212, in init_memory_pool', file=sys.stderr,
              flush=True)
        print("RuntimeError: CUDA error: out of memory", file=sys.stderr, flush=True)
        print("[TP0] Retrying memory pool init after error.", flush=True)
    last = args.worker == args.workers - 1
    if last and args.reserve_factor:
        size = int(args.reserve_factor * mem_total())
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
        keep.append(mmap.mmap(-1, size, flags=flags, prot=0))  # PROT_NONE: reserved, not used
    if last and args.compiler:
        keep.append(subprocess.Popen(["ptxas", "3600"], executable="sleep"))
        # The compiler must exist before readiness is announced.
        deadline = time.monotonic() + 10
        while not os.path.exists(f"/proc/{keep[-1].pid}") and time.monotonic() < deadline:
            time.sleep(0.01)
    mark_ready(args.ready_file, f"worker{args.worker}")
    while True:
        signal.pause()


def launcher(args: argparse.Namespace) -> None:
    procs = []
    for i in range(args.workers):
        out = None
        if args.log_dir and i == 0:
            out = open(os.path.join(args.log_dir, "rank0.log"), "a")  # noqa: SIM115
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", str(i), *sys.argv[1:]],
            stdout=out, stderr=subprocess.STDOUT if out else None))
    server = None
    if args.bind:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", args.port))
        server.listen()
    if args.zombie is not None:
        pid = os.fork()
        if pid == 0:
            os._exit(args.zombie)
        # Wait until the child has exited, without reaping it: it stays <defunct>.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    mark_ready(args.ready_file, "launcher")
    while True:
        signal.pause()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--tp-size", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bind", action="store_true")
    parser.add_argument("--zombie", type=int, default=None)
    parser.add_argument("--log-dir", default=None)
    parser.add_argument("--reserve-factor", type=float, default=0.0)
    parser.add_argument("--compiler", action="store_true")
    parser.add_argument("--worker", type=int, default=None)
    args = parser.parse_args()
    if args.worker is None:
        launcher(args)
    else:
        worker(args)


if __name__ == "__main__":
    main()
