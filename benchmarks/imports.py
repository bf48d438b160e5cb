"""What a cold ``hangscope dump`` pays to import, beside a baseline checkout, in one run.

    .venv/bin/python benchmarks/imports.py [--repeats 9] [--baseline ROOT] [--top 15]

A cold dump imports its modules while its first py-spy dumps run, and an import holds the GIL
the whole time: the ``/proc`` reads of the reader threads wait behind it (the H200 profile of
2026-12-06, docs/performance-gpu.md: imports held the GIL for about half the run). This measures
that cost apart from any job:

1. the modules a ``hangscope dump --samples 1`` of a small hung Python process (a sleeping
   child) imports, read from ``sys.modules`` after the dump, in a fresh interpreter;
2. the wall time to import all of them in a fresh interpreter (``python -c``), ``--repeats``
   times, for this checkout and for ``--baseline ROOT`` (e.g. ``git archive HEAD~3 | tar -x -C
   /tmp/base``), alternating so that both see the same machine;
3. the modules of this checkout with the largest own import time (``-X importtime``).

Prints each run, then the medians. Bytecode is compiled before the first timed run in both
trees (a user's second dump finds it on disk: hangscope/bytecode.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_LIST = """
import subprocess, sys
from hangscope.cli import main
sleeper = "import time; print(1, flush=True); time.sleep(60)"
child = subprocess.Popen([sys.executable, "-c", sleeper], stdout=subprocess.PIPE)
child.stdout.readline()
try:
    main(["dump", str(child.pid), "--samples", "1", "--format", "json", "-o", "/dev/null"])
finally:
    child.kill()
print(" ".join(sorted(m for m in sys.modules if m.startswith("hangscope"))))
"""

_TIME = """
import time
t = time.perf_counter()
import {modules}
print(time.perf_counter() - t)
"""


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's dump runs: bytecode on disk
    return env


def modules_of(root: Path) -> list[str]:
    """The hangscope modules a cold ``dump --samples 1`` imports, in ``root``'s tree."""
    out = subprocess.run([sys.executable, "-c", _LIST], capture_output=True, text=True,
                         env=_env(root), cwd=root, timeout=120, check=True)
    return out.stdout.strip().splitlines()[-1].split()


def time_imports(root: Path, modules: list[str]) -> float:
    out = subprocess.run([sys.executable, "-c", _TIME.format(modules=", ".join(modules))],
                         capture_output=True, text=True, env=_env(root), cwd=root, timeout=60,
                         check=True)
    return float(out.stdout.strip())


def heaviest(root: Path, modules: list[str], top: int) -> list[tuple[int, str]]:
    """(own import microseconds, module) of the ``top`` slowest modules to import."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c",
                          f"import {', '.join(modules)}"], capture_output=True, text=True,
                         env=_env(root), cwd=root, timeout=60, check=True)
    rows = []
    for line in out.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[0]), parts[2].strip()))
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    trees = {"this": ROOT}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    wanted = {name: modules_of(root) for name, root in trees.items()}
    for name, mods in wanted.items():
        print(f"{name}: {len(mods)} hangscope modules imported by a cold dump")
    for name, root in trees.items():  # bytecode on disk before the timed runs
        time_imports(root, wanted[name])
    runs: dict[str, list[float]] = {name: [] for name in trees}
    for i in range(args.repeats):
        line = []
        for name, root in trees.items():
            runs[name].append(time_imports(root, wanted[name]))
            line.append(f"{name} {runs[name][-1]:.3f} s")
        print(f"run {i + 1}: " + ", ".join(line))
    for name, values in runs.items():
        print(f"median {name}: {statistics.median(values):.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    print("heaviest own import times (this checkout, microseconds):")
    for micros, module in heaviest(ROOT, wanted["this"], args.top):
        print(f"  {micros:>8,}  {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
