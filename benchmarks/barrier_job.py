"""A job of N light Python "ranks" blocked forever in one multiprocessing barrier.

Used by ``benchmarks/bench.py`` for the scale rows (8, 32, 64 ranks) and for the pause probe:

    python benchmarks/barrier_job.py --ranks 64 --ready-file PATH
    python benchmarks/barrier_job.py --ranks 4 --torch --probe-dir DIR --ready-file PATH

The launcher forks N ranks and waits on them; every rank appends ``"<pid> rank<R> barrier"`` to
the ready file (the demojobs handshake) right before ``Barrier(N + 1).wait()``, which never
completes because the launcher does not join it.

``--torch`` imports torch in the launcher before forking (so a native dump of a rank pays for
libtorch's symbols, as for a real rank). ``--probe-dir`` starts, in every rank, a thread that
ticks every millisecond and appends ``"<monotonic time> <gap>"`` to ``DIR/<pid>.gaps`` whenever
two ticks are more than 4 ms apart: the pauses that rank saw (CLOCK_MONOTONIC is shared by all
processes, so the harness matches gaps to what it was doing at that time).

``--move-on-usr1`` makes SIGUSR1 (sent by a test, never by hangscope) move a rank's main
thread out of the barrier into ``moved_on()``, where it blocks again: a stack that changes on a
signal while nothing else in the job runs, for the refresh-correctness tests.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

GAP_S = 0.004


def _mark_ready(path: str | None, what: str) -> None:
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {what}\n".encode())
    finally:
        os.close(fd)


def _probe(path: str) -> None:
    """Tick every millisecond; log every gap longer than GAP_S (a pause this process saw)."""
    last = time.monotonic()
    while True:
        time.sleep(0.001)
        now = time.monotonic()
        if now - last > GAP_S:
            with open(path, "a") as fh:
                fh.write(f"{now:.6f} {now - last:.6f}\n")
        last = now


def moved_on(release: threading.Event) -> None:
    """Where a rank waits, for good, after SIGUSR1 moved it out of the barrier."""
    release.wait()


class _MovedOn(Exception):
    pass


def _raise_moved_on(signum: int, frame: object) -> None:
    raise _MovedOn


def _rank(index: int, barrier: object, ready: str | None, probe_dir: str | None,
          move_on_usr1: bool) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if probe_dir:
        path = os.path.join(probe_dir, f"{os.getpid()}.gaps")
        threading.Thread(target=_probe, args=(path,), name="probe", daemon=True).start()
    if move_on_usr1:
        signal.signal(signal.SIGUSR1, _raise_moved_on)
    _mark_ready(ready, f"rank{index} barrier")
    try:
        barrier.wait()  # type: ignore[attr-defined]
    except _MovedOn:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        moved_on(threading.Event())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--torch", action="store_true", help="import torch before forking")
    parser.add_argument("--probe-dir", help="log the pauses every rank sees into this folder")
    parser.add_argument("--move-on-usr1", action="store_true",
                        help="SIGUSR1 moves a rank from the barrier into moved_on()")
    parser.add_argument("--ready-file", default=os.environ.get("HANGSCOPE_DEMO_READY"))
    args = parser.parse_args(argv)
    if args.torch:
        import warnings

        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch  # noqa: F401

    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(args.ranks + 1)  # + 1: the launcher never arrives
    procs = [ctx.Process(target=_rank, args=(i, barrier, args.ready_file, args.probe_dir,
                                             args.move_on_usr1), name=f"rank{i}")
             for i in range(args.ranks)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
