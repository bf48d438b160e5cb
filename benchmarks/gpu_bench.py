"""How long a diagnosis of 8 CUDA ranks takes: py-spy by hand against ``hangscope dump``.

Runs on a GPU machine (docs/performance-gpu.md has the numbers)::

    python benchmarks/gpu_bench.py [--ranks 8] [--repeats 3] [--json FILE]

Starts a torchrun-like launcher with N CUDA ranks on GPU 0 (each ``torch.ones(1,
device="cuda")``, then blocked on an Event; readiness through a file), then measures, medians
of ``--repeats`` runs after one discarded warm-up pass:

- ``py-spy dump --native`` over the N ranks one after another (what users do today);
- the same N dumps all at once, and the floor for any parallel tool: the slowest single dump,
  or the sum spread over every core, whichever is larger;
- the least a cold Python tool pays (``MINIMAL_TOOL``: start, list the ranks, the N dumps at
  once);
- ``hangscope dump --format json`` as a fresh process: ``--samples 1``, and the default
  (3 samples over a 2 s window);
- the Python-only paths: ``hangscope dump --no-native --samples 1`` and a serial ``py-spy dump``;
- with ``--baseline DIR`` (another hangscope source tree, e.g. ``git archive`` of an older
  commit), the same two cold dumps of that tree in the same run, side by side;
- one ``hangscope dump --samples 1 --verbose``: where the cold dump's time goes, by phase.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
READY_ENV = "HANGSCOPE_DEMO_READY"


# --- the job ----------------------------------------------------------------------------------


def rank_main() -> None:
    import torch

    # HANGSCOPE_BENCH_DEVICE=cpu runs the machinery where there is no GPU (a smoke test).
    torch.ones(1, device=os.environ.get("HANGSCOPE_BENCH_DEVICE", "cuda"))
    with open(os.environ[READY_ENV], "a") as f:
        f.write(f"{os.getpid()} rank\n")
    threading.Event().wait()


def launcher_main(ranks: int) -> None:
    kids = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(ranks),
                   LOCAL_WORLD_SIZE=str(ranks), CUDA_VISIBLE_DEVICES="0")
        kids.append(subprocess.Popen([sys.executable, __file__, "--rank"], env=env))
    for kid in kids:
        kid.wait()


# --- measuring --------------------------------------------------------------------------------


def timed(argv: list[str], env: dict[str, str] | None = None,
          cwd: Path | None = None) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300,
                          check=False, cwd=cwd)
    return time.perf_counter() - start, done.returncode, done.stdout


def serial(pyspy: str, pids: list[int], native: bool) -> tuple[float, list[float]]:
    flag = ["--native"] if native else []
    start = time.perf_counter()
    each = [timed([pyspy, "dump", *flag, "--pid", str(pid)])[0] for pid in pids]
    return time.perf_counter() - start, each


def parallel(pyspy: str, pids: list[int]) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(pids)) as pool:
        list(pool.map(lambda pid: timed([pyspy, "dump", "--native", "--pid", str(pid)]), pids))
    return time.perf_counter() - start


#: The least a cold Python tool pays: start, list the launcher's children, start one native
#: py-spy dump per child at once, wait for all. No discovery, no /proc facts, no analysis: a
#: floor for any tool that is a Python process running py-spy (the goal's 1.5x measured
#: against it says how much of the gap the interpreter's own start is).
MINIMAL_TOOL = """
import os, subprocess, sys
pid, pyspy = sys.argv[1], sys.argv[2]
kids = []
for tid in os.listdir(f"/proc/{pid}/task"):
    with open(f"/proc/{pid}/task/{tid}/children") as f:
        kids += f.read().split()
runs = [subprocess.Popen([pyspy, "dump", "--native", "--pid", k], stdout=subprocess.DEVNULL)
        for k in kids]
sys.exit(max(r.wait() for r in runs))
"""


def minimal_tool(pyspy: str, launcher: int) -> float:
    return timed([sys.executable, "-c", MINIMAL_TOOL, str(launcher), pyspy])[0]


def hangscope(pid: int, env: dict[str, str], *flags: str, root: Path = REPO
              ) -> tuple[float, int]:
    """One cold ``hangscope dump`` of the tree at ``root``: seconds, and how many ranks its
    JSON found. (Run from ``root``: ``-m`` puts the working directory first on sys.path, so
    from anywhere else a baseline's run would time whatever tree is there.)"""
    seconds, code, out = timed([sys.executable, "-m", "hangscope", "dump", str(pid),
                                "--format", "json", *flags], env=env, cwd=root)
    ranks = 0
    if code == 0:
        try:
            ranks = sum(1 for p in json.loads(out)["processes"] if p["role"] == "rank")
        except (ValueError, KeyError):
            ranks = -1
    return seconds, ranks


def profile(pyspy: str, pid: int, env: dict[str, str], folder: Path) -> None:
    """Two cold ``--samples 1`` dumps under ``py-spy record``: every thread's samples, idle
    ones too (where the wall time goes), then the GIL holder's alone (what computes while the
    others wait for it). Raw folded stacks, one file each."""
    folder.mkdir(parents=True, exist_ok=True)
    dump = [sys.executable, "-m", "hangscope", "dump", str(pid), "--format", "json",
            "--samples", "1"]
    for name, flags in (("idle", ["--idle"]), ("gil", ["--gil"])):
        subprocess.run([pyspy, "record", "--rate", "1000", "--threads", "--format", "raw",
                        *flags, "-o", str(folder / f"{name}.txt"), "--", *dump], env=env,
                       cwd=REPO, capture_output=True, timeout=300, check=False)


def machine() -> dict[str, object]:
    info: dict[str, object] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                               "kernel": platform.release(),
                               "date": time.strftime("%Y-%m-%d", time.gmtime())}
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        info["gpu"] = name.decode() if isinstance(name, bytes) else name
        info["driver"] = pynvml.nvmlSystemGetDriverVersion()
        pynvml.nvmlShutdown()
    except Exception as exc:  # reported, not fatal
        info["gpu"] = f"unknown ({exc!r})"
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = "missing"
    sys.path.insert(0, str(REPO))
    import hangscope

    info["hangscope"] = hangscope.__version__
    return info


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another hangscope source tree, timed side by side")
    parser.add_argument("--profile", type=Path, default=None,
                        help="a folder: also record where one cold `--samples 1` dump's time "
                             "goes (py-spy record, raw folded stacks: every thread with --idle, "
                             "and the GIL holder alone with --gil)")
    args = parser.parse_args(argv)
    pyspy = os.environ.get("HANGSCOPE_PYSPY") or shutil.which("py-spy")
    if not pyspy:
        print("py-spy not found (set HANGSCOPE_PYSPY)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="hangscope-bench-"))
    ready = work / "ready"
    ready.write_text("")
    env = dict(os.environ, **{READY_ENV: str(ready)})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["HANGSCOPE_PYSPY"] = pyspy
    started = time.perf_counter()
    launcher = subprocess.Popen([sys.executable, __file__, "--launch", str(args.ranks)],
                                env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=open(work / "log.txt", "wb"))  # noqa: SIM115
    try:
        deadline = time.monotonic() + args.ready_timeout
        pids: list[int] = []
        while time.monotonic() < deadline and launcher.poll() is None:
            pids = [int(line.split()[0]) for line in ready.read_text().splitlines() if line]
            if len(pids) >= args.ranks:
                break
            time.sleep(0.1)
        if len(pids) < args.ranks:
            print(f"only {len(pids)} of {args.ranks} ranks became ready:\n"
                  + (work / "log.txt").read_text()[-3000:], file=sys.stderr)
            return 1
        startup = time.perf_counter() - started
        info = machine()
        info["py-spy"] = subprocess.run([pyspy, "--version"], capture_output=True, text=True,
                                        check=False).stdout.strip()
        cores = os.cpu_count() or 1
        warm_serial, warm_each = serial(pyspy, pids, native=True)  # discarded: warms caches
        rows: dict[str, list[float]] = {k: [] for k in (
            "serial_native", "max_single_native", "sum_single_native", "parallel_native",
            "hangscope_samples1", "hangscope_default", "hangscope_python_only",
            "serial_python", "baseline_samples1", "baseline_python_only", "minimal_tool")}
        base_env = None
        if args.baseline is not None:
            base_env = dict(env, PYTHONPATH=os.pathsep.join(
                p for p in (str(args.baseline.resolve()), os.environ.get("PYTHONPATH")) if p))
        ranks_found: dict[str, list[int]] = {"samples1": [], "default": [], "python": []}
        for _ in range(args.repeats):
            total, each = serial(pyspy, pids, native=True)
            rows["serial_native"].append(total)
            rows["max_single_native"].append(max(each))
            rows["sum_single_native"].append(sum(each))
            rows["parallel_native"].append(parallel(pyspy, pids))
            rows["minimal_tool"].append(minimal_tool(pyspy, launcher.pid))
            seconds, found = hangscope(launcher.pid, env, "--samples", "1")
            rows["hangscope_samples1"].append(seconds)
            ranks_found["samples1"].append(found)
            seconds, found = hangscope(launcher.pid, env)
            rows["hangscope_default"].append(seconds)
            ranks_found["default"].append(found)
            seconds, found = hangscope(launcher.pid, env, "--no-native", "--samples", "1")
            rows["hangscope_python_only"].append(seconds)
            ranks_found["python"].append(found)
            rows["serial_python"].append(serial(pyspy, pids, native=False)[0])
            if base_env is not None:
                base = args.baseline.resolve()
                rows["baseline_samples1"].append(
                    hangscope(launcher.pid, base_env, "--samples", "1", root=base)[0])
                rows["baseline_python_only"].append(hangscope(
                    launcher.pid, base_env, "--no-native", "--samples", "1", root=base)[0])
        phase_lines = [subprocess.run(
            [sys.executable, "-m", "hangscope", "dump", str(launcher.pid), "--format", "json",
             "--samples", "1", *extra, "--verbose"], env=env, cwd=REPO, capture_output=True,
            text=True, check=False).stderr.strip().splitlines()[-1:]
            for extra in ((), ("--no-native",))]
        if args.profile is not None:
            profile(pyspy, launcher.pid, env, args.profile)
        med = {k: _median(v) for k, v in rows.items() if v}
        floor = max(med["max_single_native"], med["sum_single_native"] / cores)
        result = {"machine": info, "ranks": args.ranks, "repeats": args.repeats,
                  "startup_s": round(startup, 2), "warmup_serial_native_s": round(warm_serial, 3),
                  "warmup_max_single_s": round(max(warm_each), 3),
                  "raw": rows, "median": med, "parallel_floor_s": floor,
                  "ranks_found": ranks_found, "phases": phase_lines}
        n = args.ranks
        lines = [
            f"hangscope GPU benchmark: {n} CUDA ranks on one {info.get('gpu')} "
            f"(driver {info.get('driver')}), {cores} cores, Python {info['python']}, "
            f"torch {info.get('torch')}, {info['py-spy']}, hangscope {info['hangscope']}, "
            f"{info['date']}; medians of {args.repeats} after one warm-up pass",
            "",
            "| what | seconds |",
            "| --- | ---: |",
            f"| serial `py-spy dump --native` over {n} ranks (users today) | "
            f"{med['serial_native']:.2f} |",
            f"| slowest single native dump | {med['max_single_native']:.2f} |",
            f"| {n} native dumps at once | {med['parallel_native']:.2f} |",
            f"| parallel floor: max(slowest dump, sum / {cores} cores) | {floor:.2f} |",
            f"| a minimal cold Python tool: start, list the ranks, {n} native dumps at once | "
            f"{med['minimal_tool']:.2f} |",
            f"| `hangscope dump --format json --samples 1` (cold process) | "
            f"{med['hangscope_samples1']:.2f} |",
            f"| `hangscope dump --format json` (default: 3 samples, 2 s window) | "
            f"{med['hangscope_default']:.2f} |",
            f"| `hangscope dump --format json --no-native --samples 1` (Python only) | "
            f"{med['hangscope_python_only']:.2f} |",
            f"| serial `py-spy dump` (Python only) over {n} ranks | "
            f"{med['serial_python']:.2f} |",
            *([f"| baseline `{args.baseline}`: `--samples 1` | {med['baseline_samples1']:.2f} |",
               f"| baseline `{args.baseline}`: `--no-native --samples 1` | "
               f"{med['baseline_python_only']:.2f} |"] if base_env is not None else []),
            "",
            *(f"phases (native, then Python-only): {line[0]}" for line in phase_lines if line),
            f"first (warm-up) serial native pass: {warm_serial:.2f} s, slowest dump "
            f"{max(warm_each):.2f} s; ranks found by hangscope: {ranks_found}; "
            f"job start to all {n} ranks ready: {startup:.1f} s",
        ]
        print("\n".join(lines))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main()
    elif len(sys.argv) > 2 and sys.argv[1] == "--launch":
        launcher_main(int(sys.argv[2]))
    else:
        sys.exit(main())
