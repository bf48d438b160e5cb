"""What the progress watcher adds to a snapshot, next to today's serial py-spy dump rounds.

    PYTHONPATH=. python benchmarks/progress_cost.py [--repeat 3] [--window 2] [--nproc 4]

Starts tests/targets/progress_gloo.py (a healthy 4-rank gloo job), then measures, per 2 s window:

- ``dumps``: today's sampler shape, 3 rounds over the window (round 1 ``py-spy dump --native``,
  rounds 2-3 ``py-spy dump``), each round all ranks in parallel; every dump pauses its target
  (ptrace) for its whole duration;
- ``watcher``: ``ProgressWatcher`` (one ``py-spy record --nonblocking`` per rank, counters at
  start and stop); targets never paused;
- ``record-subprocesses``: one ``py-spy record --nonblocking --subprocesses`` from the launcher
  instead of one per rank.

Columns: CPU seconds used by the tools (children user+sys), wall seconds beyond the window, and
the target pause (summed dump durations; 0 for nonblocking records). Kills the job at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hangscope.collect.progress import watch  # noqa: E402
from hangscope.collect.pyspy import find_pyspy  # noqa: E402

TARGET = ROOT / "tests" / "targets" / "progress_gloo.py"


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def _dump(pyspy: str, pid: int, native: bool) -> float:
    cmd = [pyspy, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
    t0 = time.monotonic()
    subprocess.run(cmd, capture_output=True, timeout=30, check=False)
    return time.monotonic() - t0


def dumps(pyspy: str, pids: list[int], window: float) -> dict[str, float]:
    """3 rounds over the window, as the sampler does today; returns cpu, extra wall, pause."""
    cpu0, t0, pause = _children_cpu(), time.monotonic(), 0.0
    with ThreadPoolExecutor(len(pids)) as pool:
        for round_no in range(3):
            due = t0 + round_no * window / 2
            time.sleep(max(0.0, due - time.monotonic()))
            pause += sum(pool.map(lambda p, n=round_no == 0: _dump(pyspy, p, n), pids))
    wall = time.monotonic() - t0
    return {"cpu_s": _children_cpu() - cpu0, "extra_wall_s": wall - window, "pause_s": pause}


def watcher(pids: list[int], window: float) -> dict[str, float]:
    timed = watch(pids, window, gpus=False)
    return {"cpu_s": timed.evidence.sampler_cpu_s, "extra_wall_s": timed.start_s + timed.stop_s,
            "pause_s": 0.0, "start_s": timed.start_s, "stop_s": timed.stop_s}


def record_subprocesses(pyspy: str, launcher: int, window: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        cpu0, t0 = _children_cpu(), time.monotonic()
        proc = subprocess.Popen(
            [pyspy, "record", "--nonblocking", "--idle", "--threads", "--subprocesses",
             "--rate", "100", "--format", "raw", "--pid", str(launcher),
             "--output", f"{folder}/out.txt"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(window)
        stop0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        end = time.monotonic()
    return {"cpu_s": _children_cpu() - cpu0, "extra_wall_s": end - stop0, "pause_s": 0.0,
            "total_s": end - t0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=float, default=2.0)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    pyspy = find_pyspy()
    ready = Path(tempfile.mkdtemp()) / "ready"
    job = subprocess.Popen([sys.executable, str(TARGET), "sleepy", "--nproc", str(args.nproc),
                            "--ready-file", str(ready)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    rows: dict[str, list[dict[str, float]]] = {"dumps": [], "watcher": [],
                                                 "record-subprocesses": []}
    try:
        deadline = time.monotonic() + 90
        while not (ready.exists() and len(ready.read_text().splitlines()) >= args.nproc):
            if time.monotonic() > deadline or job.poll() is not None:
                print("the gloo job did not become ready", file=sys.stderr)
                return 1
            time.sleep(0.1)
        pids = sorted(int(line.split()[0]) for line in ready.read_text().splitlines())
        for _ in range(args.repeat):
            rows["dumps"].append(dumps(pyspy, pids, args.window))
            rows["watcher"].append(watcher(pids, args.window))
            rows["record-subprocesses"].append(record_subprocesses(pyspy, job.pid, args.window))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    print(f"{args.nproc} gloo ranks, {args.window:.1f} s window, {os.cpu_count()} cores, "
          f"median of {args.repeat}")
    print(f"{'mode':22} {'tool CPU s':>10} {'extra wall s':>12} {'target pause s':>15}")
    for mode, runs in rows.items():
        med = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0]}
        print(f"{mode:22} {med['cpu_s']:>10.3f} {med['extra_wall_s']:>12.3f} "
              f"{med['pause_s']:>15.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
