"""What measuring progress costs a snapshot: the sampler with and without the watcher.

    PYTHONPATH=. python benchmarks/progress_sampler.py [--repeat 5] [--nproc 4]

Starts tests/targets/progress_gloo.py (a healthy gloo job whose ranks sleep or wait), then
times ``Sampler.snapshot()`` in two shapes, each with the watcher on and off (``--no-progress``):

- ``dump``: ``hangscope dump``'s defaults (3 samples over 2 s), a new Sampler each time;
- ``attach``: ``hangscope attach``'s defaults (2 samples over 1 s), one Sampler refreshed:
  its first tick records (one ``py-spy record`` per rank), later ticks read counters and GPM
  only (``record=False``).

Columns (medians): wall seconds of the snapshot, wall beyond the window, CPU seconds of the
tools hangscope ran (children user+sys), and the verdict kind. Kills the job at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hangscope.live.sampler import SampleOptions, Sampler  # noqa: E402
from hangscope.model import Snapshot  # noqa: E402

TARGET = ROOT / "tests" / "targets" / "progress_gloo.py"


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def _timed(take: Callable[[], Snapshot]) -> tuple[float, float, str]:
    cpu0, t0 = _children_cpu(), time.monotonic()
    snap = take()
    kind = str(snap.verdict.kind) if snap.verdict else "?"
    return time.monotonic() - t0, _children_cpu() - cpu0, kind


def _start(nproc: int, folder: str) -> tuple[subprocess.Popen[bytes], int]:
    ready = Path(folder) / "ready"
    job = subprocess.Popen([sys.executable, str(TARGET), "sleepy", "--nproc", str(nproc),
                            "--ready-file", str(ready)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if ready.exists() and len(ready.read_text().splitlines()) >= nproc:
            return job, job.pid
        if job.poll() is not None:
            raise SystemExit(f"the job exited with {job.returncode}")
        time.sleep(0.1)
    raise SystemExit("the job was not ready within 120 s")


def _row(name: str, window: float, runs: list[tuple[float, float, str]]) -> str:
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    kinds = ",".join(sorted({r[2] for r in runs}))
    return f"| {name} | {wall:.2f} | {wall - window:.2f} | {cpu:.2f} | {kinds} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        job, pid = _start(args.nproc, folder)
        try:
            rows = ["| shape | wall s | beyond window s | tools' CPU s | verdict |",
                    "| --- | --- | --- | --- | --- |"]
            for progress in (True, False):
                dump = SampleOptions(progress=progress)
                runs = [_timed(Sampler(pid, dump).snapshot) for _ in range(args.repeat)]
                rows.append(_row(f"dump, progress {'on' if progress else 'off'}", 2.0, runs))
            for progress in (True, False):
                live = SampleOptions(samples=2, window=1.0, progress=progress)
                sampler = Sampler(pid, live)
                first = [_timed(sampler.snapshot)]
                later = [_timed(sampler.snapshot) for _ in range(args.repeat)]
                label = "on" if progress else "off"
                rows.append(_row(f"attach first tick, progress {label}", 1.0, first))
                rows.append(_row(f"attach later ticks, progress {label}", 1.0, later))
            print("\n".join(rows))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
