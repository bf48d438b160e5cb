"""hangscope's costs next to what users do today, measured side by side in one run.

    /tmp/venv/bin/python benchmarks/bench.py                 # everything (~4 min on 2 cores)
    /tmp/venv/bin/python benchmarks/bench.py --jobs gloo4 light8 --repeats 3 --no-scale
    /tmp/venv/bin/python benchmarks/bench.py --json out.json

Jobs (all real, all hung, all killed at the end whatever happens; see ``benchmarks/jobs.py``):

- ``gloo4``, ``gloo8``: the mismatch demo, 4 or 8 gloo torch ranks under a launcher;
- ``light8``, ``light32``, ``light64``: that many plain Python processes in one barrier.

Columns, per job (medians of ``--repeats`` runs, the runs interleaved so drift hits all alike):

- ``serial loop``: ``py-spy dump --native --pid P`` for every rank in turn (what users do);
- ``floor``: the parallel py-spy floor, max(slowest single dump, sum of the dumps / cores);
  ``cold/floor, all procs`` divides by the same floor over every Python process of the job
  (the launcher too, which hangscope samples and the users' loop does not);
- ``py-spy -P cores``: those same native dumps run ``cores`` at a time by a bare thread pool
  (``xargs -P``), measured: what parallel py-spy achieves on this machine, without hangscope;
- ``cold``: a new ``Sampler(samples=1, window=0).snapshot()``: discovery, one round of native
  and Python stacks and /proc facts for every process of the job (launcher included), analysis;
- ``refresh``: the same Sampler's second ``snapshot()`` on the unchanged job (a TUI tick);
  ``refresh 3``: its third (``steady``);
- ``py-only``: a new Sampler with ``native=False``; ``live``: with ``nonblocking=True``;
- ``default``: the default dump (3 samples over a 2 s window, which is a deliberate wait).

The pause table runs a job whose ranks measure their own largest gap (``--probe-dir`` in
``barrier_job.py``: 4 ranks that import torch) under each way of sampling. Peak RSS is
hangscope's own (``ru_maxrss`` of a child that runs a cold snapshot and two refreshes), not
py-spy's. ``--scale`` runs ``synthetic.py``'s analysis benchmark (8,192 and 131,072 ranks).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hangscope.demo.jobs import DemoJob  # noqa: E402
from jobs import barrier_job, gloo_job  # noqa: E402

from hangscope.collect import pyspy  # noqa: E402
from hangscope.live.sampler import SampleOptions, Sampler  # noqa: E402
from hangscope.model import VerdictKind  # noqa: E402

CORES = len(os.sched_getaffinity(0))
JOBS: dict[str, tuple[Callable[[], contextlib.AbstractContextManager[DemoJob]], VerdictKind]] = {
    "gloo4": (lambda: gloo_job(4), VerdictKind.MISMATCHED_COLLECTIVES),
    "gloo8": (lambda: gloo_job(8), VerdictKind.MISMATCHED_COLLECTIVES),
    "light8": (lambda: barrier_job(8), VerdictKind.ALL_WAITING),
    "light32": (lambda: barrier_job(32), VerdictKind.ALL_WAITING),
    "light64": (lambda: barrier_job(64), VerdictKind.ALL_WAITING),
}


# -- machine ----------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with contextlib.suppress(OSError, ValueError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) * 1024

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "-"

    rev = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False).stdout.strip()
    return {
        "cpu": cpu, "cores": CORES, "memory_gib": round(mem / 2**30, 1),
        "kernel": platform.release(), "python": platform.python_version(),
        "torch": version("torch"), "py-spy": pyspy.version() or "-",
        "psutil": version("psutil"), "hangscope": f"{version('hangscope')} ({rev or '?'})",
        "load_average": os.getloadavg()[0],
    }


# -- measurements -----------------------------------------------------------------------

def py_spy_once(pid: int, native: bool = True) -> float:
    binary = pyspy.find_pyspy()
    cmd = [binary, "dump", "--json", "--pid", str(pid)] + (["--native"] if native else [])
    t0 = time.monotonic()
    subprocess.run(cmd, capture_output=True, check=False, timeout=60)
    return time.monotonic() - t0


def serial_loop(pids: list[int]) -> tuple[float, list[float]]:
    """What users do today: one native py-spy dump per rank, one after the other."""
    t0 = time.monotonic()
    each = [py_spy_once(pid) for pid in pids]
    return time.monotonic() - t0, each


def floor_of(each: list[float]) -> float:
    return max(max(each), sum(each) / CORES)


def parallel_loop(pids: list[int]) -> float:
    """``xargs -P CORES``: the same native dumps, CORES at a time, slowest first, no hangscope."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=CORES) as pool:
        list(pool.map(py_spy_once, pids))
    return time.monotonic() - t0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def rank_pids(job: DemoJob) -> list[int]:
    return list(job.ready_pids)


def measure_job(name: str, repeats: int, default_runs: int) -> dict[str, Any]:
    factory, expected = JOBS[name]
    rows: list[dict[str, float]] = []
    kinds: set[str] = set()
    with factory() as job:
        pids = rank_pids(job)
        cold_opts = SampleOptions(samples=1, window=0.0)
        others: list[int] = []  # the job's other Python processes (the launcher): hangscope
        for _ in range(repeats):  # samples them too, users' loops do not
            row: dict[str, float] = {}
            row["serial"], each = serial_loop(pids)
            row["floor"] = floor_of(each)
            row["dump_max"] = max(each)
            row["floor_all"] = floor_of(each + [py_spy_once(pid) for pid in others])
            sampler = Sampler(job.pid, cold_opts)
            row["cold"], snap = timed(sampler.snapshot)
            if not others:
                others = [p.pid for p in snap.processes if p.python and p.pid not in pids]
                row["floor_all"] = floor_of(each + [py_spy_once(pid) for pid in others])
            row["parallel"] = parallel_loop(pids + others)
            kinds.add(str(snap.verdict.kind))
            row["processes"] = len(snap.processes)
            row["native_sampled"] = sum(p.native_sampled for p in snap.processes)
            row["refresh"], snap = timed(sampler.snapshot)
            kinds.add(str(snap.verdict.kind))
            row["refresh3"], snap = timed(sampler.snapshot)
            row["py_only"], snap = timed(
                Sampler(job.pid, SampleOptions(samples=1, window=0.0, native=False)).snapshot)
            kinds.add(str(snap.verdict.kind))
            live = Sampler(job.pid, SampleOptions(samples=1, window=0.0, nonblocking=True))
            row["live"], snap = timed(live.snapshot)
            row["live_refresh"], snap = timed(live.snapshot)
            rows.append(row)
        defaults = [timed(Sampler(job.pid, SampleOptions()).snapshot)[0]
                    for _ in range(default_runs)]
        rss = peak_rss(job.pid)
    out = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    out["cold_over_floor"] = statistics.median(r["cold"] / r["floor"] for r in rows)
    out["cold_over_floor_all"] = statistics.median(r["cold"] / r["floor_all"] for r in rows)
    out["cold_over_parallel"] = statistics.median(r["cold"] / r["parallel"] for r in rows)
    out["refresh_over_cold"] = statistics.median(r["refresh"] / r["cold"] for r in rows)
    out["refresh3_over_cold"] = statistics.median(r["refresh3"] / r["cold"] for r in rows)
    out["default"] = statistics.median(defaults) if defaults else None
    out["rss_mib"] = rss
    out["ranks"] = len(pids)
    out["verdicts"] = sorted(kinds)
    out["verdict_ok"] = kinds == {str(expected)}
    out["runs"] = rows
    return out


_RSS_CHILD = """
import resource, sys, json
from hangscope.live.sampler import SampleOptions, Sampler
s = Sampler(int(sys.argv[1]), SampleOptions(samples=1, window=0.0))
for _ in range(3):
    s.snapshot()
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""


def peak_rss(pid: int) -> float | None:
    """hangscope's own peak RSS (MiB) over a cold snapshot and two refreshes of the job."""
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(pid)], capture_output=True,
                         text=True, check=False, timeout=300)
    try:
        return round(json.loads(out.stdout.strip().splitlines()[-1]) / 1024, 1)
    except (ValueError, IndexError):
        print(f"  RSS child failed: {out.stderr[-400:]}", file=sys.stderr)
        return None


# -- pauses ----------------------------------------------------------------------------

def _gaps(probe_dir: Path) -> dict[int, list[tuple[float, float]]]:
    out: dict[int, list[tuple[float, float]]] = {}
    for path in probe_dir.glob("*.gaps"):
        rows = []
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                end, gap = line.split()
                rows.append((float(end), float(gap)))
        out[int(path.stem)] = rows
    return out


def _worst_pause(probe_dir: Path, pids: list[int], t0: float, t1: float) -> float:
    """The longest gap any rank saw that ended within [t0, t1 + 50 ms], in seconds."""
    time.sleep(0.06)  # a gap is logged when it ends: let the last one land
    gaps = _gaps(probe_dir)
    worst = 0.0
    for pid in pids:
        for end, gap in gaps.get(pid, []):
            if t0 <= end <= t1 + 0.05:
                worst = max(worst, gap)
    return worst


def measure_pauses(repeats: int) -> dict[str, Any]:
    """Each way of sampling, run against ranks that log their own largest gap."""
    with tempfile.TemporaryDirectory(prefix="hangscope-probe-") as tmp:
        probe_dir = Path(tmp)
        with barrier_job(4, torch=True, probe_dir=probe_dir) as job:
            pids = rank_pids(job)
            time.sleep(0.5)
            results: dict[str, list[float]] = {}

            def run(label: str, fn: Callable[[], Any]) -> None:
                time.sleep(0.1)
                t0 = time.monotonic()
                fn()
                t1 = time.monotonic()
                results.setdefault(label, []).append(_worst_pause(probe_dir, pids, t0, t1))

            for _ in range(repeats):
                run("idle (no sampling, 0.5 s)", lambda: time.sleep(0.5))
                run("py-spy --native, serial loop", lambda: [py_spy_once(p) for p in pids])
                run("py-spy (Python only), serial loop",
                    lambda: [py_spy_once(p, native=False) for p in pids])
                sampler = Sampler(job.pid, SampleOptions(samples=1, window=0.0))
                run("hangscope cold", sampler.snapshot)
                run("hangscope refresh", sampler.snapshot)
                run("hangscope refresh 3", sampler.snapshot)
                run("hangscope --no-native",
                    Sampler(job.pid, SampleOptions(samples=1, window=0.0, native=False)).snapshot)
                live = Sampler(job.pid, SampleOptions(samples=1, window=0.0, nonblocking=True))
                run("hangscope --nonblocking", live.snapshot)
                run("hangscope --nonblocking refresh", live.snapshot)
    return {label: {"median_ms": round(1000 * statistics.median(v), 1),
                    "max_ms": round(1000 * max(v), 1)} for label, v in results.items()}


# -- report -----------------------------------------------------------------------------

def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:,.0f}"


def table(results: dict[str, dict[str, Any]]) -> str:
    head = ("| job | ranks (procs) | serial loop ms | floor ms | cold ms | cold/floor | "
            "cold/floor, all procs | py-spy -P cores ms | cold/that | refresh ms | "
            "refresh/cold | refresh 3 ms | py-only ms | "
            "live ms | live refresh ms | default 3x2s ms | peak RSS MiB | verdict |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['ranks']} ({r['processes']:.0f}) | {_ms(r['serial'])} | "
            f"{_ms(r['floor'])} | {_ms(r['cold'])} | {r['cold_over_floor']:.2f} | "
            f"{r['cold_over_floor_all']:.2f} | {_ms(r['parallel'])} | "
            f"{r['cold_over_parallel']:.2f} | "
            f"{_ms(r['refresh'])} | {r['refresh_over_cold']:.3f} | {_ms(r['refresh3'])} | "
            f"{_ms(r['py_only'])} | {_ms(r['live'])} | {_ms(r['live_refresh'])} | "
            f"{_ms(r['default'])} | {r['rss_mib'] if r['rss_mib'] is not None else '-'} | "
            f"{'ok' if r['verdict_ok'] else 'WRONG ' + ','.join(r['verdicts'])} |")
    return "\n".join(lines)


def pause_table(pauses: dict[str, Any]) -> str:
    lines = ["| sampling | worst pause a rank saw, median of runs (ms) | worst of all runs (ms) |",
             "|---|---|---|"]
    for label, p in pauses.items():
        lines.append(f"| {label} | {p['median_ms']} | {p['max_ms']} |")
    return "\n".join(lines)


@contextlib.contextmanager
def _stage(label: str) -> Iterator[None]:
    print(f"... {label}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    yield
    print(f"    {label}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", nargs="*", choices=list(JOBS), default=list(JOBS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--default-runs", type=int, default=1,
                        help="runs of the default 3-sample, 2 s dump per job (0: skip)")
    parser.add_argument("--no-pause", action="store_true", help="skip the pause probe")
    parser.add_argument("--no-scale", action="store_true", help="skip the synthetic analysis")
    parser.add_argument("--scale-ranks", type=int, nargs="+", default=[8192, 131072])
    parser.add_argument("--scale-raw-max", type=int, default=8192,
                        help="unclassified input (the sampler's) only up to this many ranks: "
                        "a sampler reads one node; bigger jobs arrive merged, classified")
    parser.add_argument("--json", metavar="FILE", help="also write every number here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    info = machine()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    results: dict[str, Any] = {}
    for name in args.jobs:
        with _stage(name):
            results[name] = measure_job(name, args.repeats, args.default_runs)
    print()
    print(table(results))
    pauses = None
    if not args.no_pause:
        with _stage("pauses"):
            pauses = measure_pauses(args.repeats)
        print()
        print(pause_table(pauses))
    scale = []
    if not args.no_scale:
        import synthetic

        with _stage("scale"):
            for ranks in args.scale_ranks:
                for classified in (True, False):
                    if classified or ranks <= args.scale_raw_max:
                        scale.append(_scale_child(ranks, classified))
        print()
        print(synthetic.scale_table(scale))
    print(f"\n(total {time.monotonic() - started:.0f} s; load average now "
          f"{os.getloadavg()[0]:.1f}; this process's peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "jobs": results,
                                               "pauses": pauses, "scale": scale}, indent=1))
    return 0


def _scale_child(ranks: int, classified: bool) -> dict[str, Any]:
    """synthetic.bench in a fresh interpreter pinned to one core (its heap is its own)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import synthetic; "
            "synthetic.pin_one_core(); "
            "print(json.dumps(synthetic.bench(int(sys.argv[2]), 'mismatch', 1, "
            "sys.argv[3] == '1', findings_max=0)))")
    out = subprocess.run([sys.executable, "-c", code, str(HERE), str(ranks),
                          "1" if classified else "0"], capture_output=True, text=True,
                         check=False, timeout=900)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ranks": ranks, "classified": classified, "error": out.stderr[-400:]}


if __name__ == "__main__":
    sys.exit(main())
