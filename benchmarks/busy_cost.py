"""What a dump costs on a process that computes, next to the same process idle.

    .venv/bin/python benchmarks/busy_cost.py [--repeats 5] [--baseline ROOT]

Starts ``benchmarks/busy_job.py`` twice, one after the other (``busy``: a training-like main
thread whose torch math computes on every core, a Python thread preprocessing in pure
Python; ``idle``: the same threads, all waiting), and runs ``hangscope dump --format json PID``
(the default: 3 samples over a 2 s window) ``--repeats`` times on each, this checkout's and,
with ``--baseline ROOT``, another checkout's in turn (``git archive 88d4685 | tar -x -C
/tmp/base``). Per run: wall seconds, CPU seconds of the dump and every tool it ran (its
children's rusage), how many blocking py-spy reads paused the target during the window
(``pauses``), and whether its native stacks were taken. Issue 36: a busy process must not cost
five times an idle one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from jobs import busy_job  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def dump(pid: int, root: Path) -> dict[str, object]:
    """One ``hangscope dump`` of ``pid`` with the hangscope under ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    cpu, t0 = _children_cpu(), time.monotonic()
    out = subprocess.run([sys.executable, "-m", "hangscope", "dump", "--format", "json",
                          str(pid)], capture_output=True, text=True, check=False, timeout=120,
                         env=env, cwd=root)
    wall, cpu = time.monotonic() - t0, _children_cpu() - cpu
    try:
        data = json.loads(out.stdout)
    except ValueError:
        return {"wall": wall, "cpu": cpu, "error": out.stderr[-300:]}
    proc = next(p for p in data["processes"] if p["pid"] == pid)
    progress = (data.get("readings") or [{}])[0].get("progress") or {}
    pauses = sum(p.get("pauses") or 0 for p in progress.get("processes", ()))
    return {"wall": wall, "cpu": cpu, "pauses": pauses, "native": bool(proc["native_sampled"]),
            "verdict": data["verdict"]["kind"], "cpu_percent": proc.get("cpu_percent")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", metavar="ROOT", type=Path)
    args = parser.parse_args(argv)
    checkouts = [("now", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"load average {os.getloadavg()[0]:.1f}")
    runs: dict[tuple[str, str], list[dict[str, object]]] = {}
    for mode in ("idle", "busy"):
        with busy_job(mode) as job:
            for _ in range(args.repeats):
                for label, root in checkouts:
                    row = dump(job.pid, root)
                    runs.setdefault((mode, label), []).append(row)
                    print(f"{mode:4} {label:8} " + ", ".join(
                        f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in row.items()), flush=True)
    print()
    print("| process | code | wall s | CPU s | pauses | native taken | verdicts |")
    print("|---|---|---|---|---|---|---|")
    for (mode, label), rows in runs.items():
        ok = [r for r in rows if "error" not in r]

        def spread(key: str, rows: list[dict[str, object]] = ok) -> str:
            values = [float(r[key]) for r in rows]  # type: ignore[arg-type]
            return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

        natives = sum(bool(r["native"]) for r in ok)
        verdicts = ", ".join(sorted({str(r["verdict"]) for r in ok}))
        print(f"| {mode} | {label} | {spread('wall')} | {spread('cpu')} | "
              f"{spread('pauses')} | {natives}/{len(ok)} | {verdicts} |")
    for label, _ in checkouts:
        busy = statistics.median(float(r["cpu"]) for r in runs[("busy", label)])  # type: ignore[arg-type]
        idle = statistics.median(float(r["cpu"]) for r in runs[("idle", label)])  # type: ignore[arg-type]
        wall_b = statistics.median(float(r["wall"]) for r in runs[("busy", label)])  # type: ignore[arg-type]
        wall_i = statistics.median(float(r["wall"]) for r in runs[("idle", label)])  # type: ignore[arg-type]
        print(f"{label}: busy/idle wall {wall_b / wall_i:.2f}x, CPU {busy / idle:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
