"""A cold ``hangscope dump`` of 4 hung gloo ranks under torchrun, beside the py-spy baselines.

    .venv/bin/python benchmarks/cold_dump.py [--repeats 5] [--baseline ROOT]

Starts the ``torchrun`` demo (``torch.distributed.run --standalone``, 4 gloo ranks hung in a
mismatch, through ``hangscope.demo.jobs.running_demo``: ready-file handshake, every process
SIGKILLed at the end), then, in each run and one after the other on the same job:

- ``serial``: ``py-spy dump --native --pid P`` for each of the job's Python processes (the 4
  ranks and torchrun's agent) in turn: the loop a user runs today;
- ``floor``: the parallel py-spy floor from those same dumps, max(slowest, sum / cores);
- ``-P cores``: the same dumps run ``cores`` at a time by a bare thread pool, measured;
- ``cold``: ``hangscope dump -v PID`` in a fresh interpreter (the default: 3 samples over a
  2 s window, which ends after 1 s where the ranks' silence before it covers it:
  hangscope/live/settle.py), with the phases its ``-v`` line prints; ``cold 1 sample``:
  ``--samples 1``, the stacks without the window, what the serial loop gives;
- ``baseline``: the same command on another checkout (``--baseline ROOT``, e.g. ``git archive
  88d4685 | tar -x -C /tmp/base``), run right after, when given.

Each ``hangscope dump`` starts on a job left alone as a hung job is: the measures before it
pause the ranks (a py-spy stop wakes every thread), so it first waits until each rank's main
thread has been off CPU for the window and a little more again (``/proc``, with a deadline).

The goal (issue 36): cold at most max(floor, window) + 0.5 s, and below the serial loop in
every run. Prints each run, then the medians and the spread (min-max).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench import CORES, floor_of, parallel_loop, serial_loop  # noqa: E402
from hangscope.demo.jobs import running_demo  # noqa: E402

from hangscope.collect.procfs import read_off_cpu  # noqa: E402

WINDOW_S = 2.0  # hangscope dump's default window
MARGIN_S = 0.5


def cold_dump(pid: int, root: Path, *extra: str) -> tuple[float, dict[str, float], str]:
    """(wall seconds, phases from ``-v``, the verdict's first line) of ``hangscope dump``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "hangscope", "dump", "-v", *extra, str(pid)],
                         capture_output=True, text=True, check=False, timeout=120, env=env,
                         cwd=root)
    wall = time.monotonic() - t0
    line = next((li for li in out.stderr.splitlines() if li.startswith("hangscope: phases:")),
                "")
    phases: dict[str, float] = {}
    for part in line.split(": ", 2)[-1].split(";")[0].split(", "):
        name, _, rest = part.rpartition(" ")
        name, _, seconds = name.rpartition(" ")
        if name and rest == "s":
            phases[name] = float(seconds)
    verdict = next((li for li in out.stdout.splitlines() if "VERDICT" in li), "no verdict")
    return wall, phases, verdict.strip("╭─ ")


def left_alone(ranks: list[int], seconds: float = WINDOW_S + 0.3,
               deadline_s: float = 8.0) -> bool:
    """Wait until each rank's main thread has been off CPU ``seconds`` (the wakes of the
    last measure's pauses behind it), at most ``deadline_s``; whether they all were (a
    thread's time can be unreadable: then the dump that follows watches its whole window)."""
    t0 = time.monotonic()
    while min(read_off_cpu(pid).get(pid, 0.0) for pid in ranks) < seconds:
        if time.monotonic() - t0 > deadline_s:
            return False
        time.sleep(0.05)  # polling the ranks' own clocks, with the deadline above
    return True


def _spread(values: list[float]) -> str:
    return (f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
            if values else "-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", metavar="ROOT", type=Path,
                        help="another checkout whose `hangscope dump` runs beside this one")
    args = parser.parse_args(argv)
    print(f"{CORES} cores, load average {os.getloadavg()[0]:.1f}")
    rows: list[dict[str, float]] = []
    verdicts: set[str] = set()
    with running_demo("torchrun", timeout=180) as job:
        pids = [p.pid for p in job.processes() if "python" in (p.name() or "")]
        print(f"job: torchrun agent {job.pid}, {len(pids)} Python processes {pids}")
        for run in range(args.repeats):
            row: dict[str, float] = {}
            row["serial"], each = serial_loop(pids)
            row["floor"] = floor_of(each)
            row["parallel"] = parallel_loop(pids)
            left_alone(job.ready_pids)
            row["cold"], phases, verdict = cold_dump(job.pid, ROOT)
            verdicts.add(verdict)
            # The stacks alone, no window: what the serial loop gives, like for like.
            left_alone(job.ready_pids)
            row["cold 1 sample"], _, verdict = cold_dump(job.pid, ROOT, "--samples", "1")
            verdicts.add(verdict)
            row.update({f"phase {k}": v for k, v in phases.items()})
            if args.baseline:
                left_alone(job.ready_pids)
                row["baseline"], old_phases, verdict = cold_dump(job.pid, args.baseline)
                verdicts.add(verdict)
                row.update({f"baseline {k}": v for k, v in old_phases.items()})
            goal = max(row["floor"], WINDOW_S) + MARGIN_S
            row["goal"] = goal
            print(f"run {run + 1}: serial {row['serial']:.2f} s, floor {row['floor']:.2f} s, "
                  f"-P {CORES} {row['parallel']:.2f} s, cold {row['cold']:.2f} s "
                  f"(1 sample {row['cold 1 sample']:.2f} s)"
                  + (f", baseline {row['baseline']:.2f} s" if args.baseline else "")
                  + f"; goal {goal:.2f} s: {'met' if row['cold'] <= goal else 'MISSED'}, "
                  f"{'below' if row['cold'] < row['serial'] else 'NOT below'} the serial loop")
            print("    phases: " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
            if args.baseline:
                print("    baseline phases: " + ", ".join(f"{k} {v:.2f}"
                                                        for k, v in old_phases.items()))
            rows.append(row)
    print()
    print("| measure | median s (min-max) |")
    print("|---|---|")
    for key in rows[0]:
        print(f"| {key} | {_spread([r[key] for r in rows if key in r])} |")
    met = sum(r["cold"] <= r["goal"] for r in rows)
    below = sum(r["cold"] < r["serial"] for r in rows)
    print(f"\ngoal met in {met}/{len(rows)} runs; below the serial loop in {below}/{len(rows)};"
          f" verdicts: {sorted(verdicts)}")
    return 0 if met == below == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
