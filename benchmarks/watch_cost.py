"""What ``hangscope watch`` costs a job while it runs: the watcher's CPU and the ranks' pauses.

    python benchmarks/watch_cost.py [--seconds 60] [--ranks 4]

Runs the pause-probe job of bench.py (``barrier_job.py --torch --probe-dir``: every rank logs
each gap of more than 4 ms in its own 1 ms ticker) for the same time twice, side by side in one
run: first alone (the baseline: what the machine's own scheduling costs the ranks), then with
``hangscope watch`` beside it (``--after`` longer than the run, so it never captures and only
its pulses are measured). The watcher's CPU is its own plus its py-spy children's, from
``/proc/PID/stat`` of the watcher after it exits (children reaped: cutime/cstime).
Goals (issue 21): at most 2% of one core; no rank paused more than 1 ms beyond the baseline.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import _worst_pause, rank_pids  # noqa: E402
from jobs import barrier_job  # noqa: E402


def _cpu_with_children(pid: int) -> float:
    """utime + stime + cutime + cstime of a process that has not been reaped, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hangscope-watchcost-") as tmp:
        probe = Path(tmp) / "probe"
        probe.mkdir()
        with barrier_job(args.ranks, torch=True, probe_dir=probe) as job:
            pids = rank_pids(job)
            t0 = time.monotonic()
            time.sleep(args.seconds)
            baseline = _worst_pause(probe, pids, t0, time.monotonic())
            watcher = subprocess.Popen(
                [sys.executable, "-m", "hangscope", "watch", str(job.pid), "--after",
                 str(args.seconds * 10), "--interval", str(args.interval), "--out",
                 str(Path(tmp) / "out")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(3)  # its start (imports, discovery) is not the steady cost
            start_cpu = _cpu_with_children(watcher.pid)
            t1 = time.monotonic()
            time.sleep(args.seconds)
            t2 = time.monotonic()
            watched = _worst_pause(probe, pids, t1, t2)
            watcher.send_signal(signal.SIGTERM)
            # wait without reaping, so cutime/cstime still read
            os.waitid(os.P_PID, watcher.pid, os.WEXITED | os.WNOWAIT)
            cpu = _cpu_with_children(watcher.pid) - start_cpu
            watcher.wait()
            captures = list((Path(tmp) / "out").glob("*.json"))
    share = 100 * cpu / (t2 - t1)
    print(f"| over {args.seconds:.0f} s, {args.ranks} torch ranks | alone (baseline) | "
          "with hangscope watch |")
    print("| --- | ---: | ---: |")
    print(f"| worst pause a rank saw | {baseline * 1000:.1f} ms | {watched * 1000:.1f} ms |")
    print(f"| watcher CPU (own + py-spy) | - | {cpu:.2f} s = {share:.2f}% of one core |")
    print(f"| captures written | - | {len(captures)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
