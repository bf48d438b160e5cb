"""Real hung jobs for the benchmarks, started and killed through ``hangscope.demo.jobs``.

``running_demo`` waits on the ready-file handshake (so a job is measured only once every rank
is in its hanging call) and, on exit, normal or not, SIGKILLs the job's session and every
descendant it saw. Both job kinds here go through it, so nothing a benchmark starts survives it.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hangscope.demo import jobs as demojobs
from hangscope.demo.jobs import DemoJob, DemoSpec, running_demo

BARRIER_JOB = Path(__file__).resolve().parent / "barrier_job.py"


@contextmanager
def gloo_job(ranks: int, timeout: float = 180.0) -> Iterator[DemoJob]:
    """The ``mismatch`` demo with ``ranks`` gloo torch ranks (rank N-1 in all_gather)."""
    spec = DemoSpec(
        name=f"bench-mismatch-{ranks}",
        description=f"mismatch demo, {ranks} gloo ranks",
        build_argv=demojobs._plain_demo("mismatch", "--nproc-per-node", str(ranks)),
        ready_lines=ranks, ranks=ranks)
    with running_demo(spec, timeout=timeout) as job:
        yield job


@contextmanager
def barrier_job(ranks: int, torch: bool = False, probe_dir: Path | None = None,
                move_on_usr1: bool = False, timeout: float = 120.0) -> Iterator[DemoJob]:
    """``ranks`` light Python processes blocked in one multiprocessing barrier."""
    extra = ["--ranks", str(ranks)]
    if torch:
        extra.append("--torch")
    if probe_dir is not None:
        extra += ["--probe-dir", str(probe_dir)]
    if move_on_usr1:
        extra.append("--move-on-usr1")
    key = f"{ranks}-" + hashlib.sha1(" ".join(extra).encode()).hexdigest()[:12]

    def build(ready_file: Path) -> list[str]:
        return [sys.executable, str(BARRIER_JOB), *extra, "--ready-file", str(ready_file)]

    spec = DemoSpec(name=f"bench-barrier-{key}", description=f"{ranks} barrier ranks",
                    build_argv=build, ready_lines=ranks, ranks=ranks)
    with running_demo(spec, timeout=timeout) as job:
        yield job


BUSY_JOB = Path(__file__).resolve().parent / "busy_job.py"


@contextmanager
def busy_job(mode: str, threads: int = 1, timeout: float = 120.0) -> Iterator[DemoJob]:
    """One torch process whose threads compute on every core (``busy``) or all wait (``idle``)."""
    def build(ready_file: Path) -> list[str]:
        return [sys.executable, str(BUSY_JOB), "--mode", mode, "--threads", str(threads),
                "--ready-file", str(ready_file)]

    spec = DemoSpec(name=f"bench-{mode}-{threads}", description=f"{mode} process, {threads} "
                    "Python threads", build_argv=build, ready_lines=1, ranks=1)
    with running_demo(spec, timeout=timeout) as job:
        yield job
