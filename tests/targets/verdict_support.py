"""Start a ``verdict_jobs.py`` job, wait for its ready lines, dump it, kill it at the end.

Readiness is the ready-file handshake with a deadline; teardown kills the job's whole process
group (it runs in its own session) and waits until every process is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from support import run_cli

TARGETS = Path(__file__).resolve().parent
JOBS = TARGETS / "verdict_jobs.py"


@dataclass
class Job:
    launcher: int
    pids: dict[str, int]  # ready tag -> PID
    workdir: Path
    ready_file: Path
    log: Path

    def ready_tags(self) -> dict[str, int]:
        out = {}
        for line in self.ready_file.read_text().splitlines():
            pid, _, tag = line.partition(" ")
            out[tag] = int(pid)
        return out

    def wait_for(self, tags: Sequence[str], timeout: float) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.ready_tags()
            if all(t in found for t in tags):
                self.pids.update(found)
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"job not ready after {timeout:g} s: have {sorted(found)}, "
                                     f"want {list(tags)}; log: {self.log.read_text()[-2000:]}")
            time.sleep(0.02)


@contextlib.contextmanager
def verdict_job(mode: str, tmp_path: Path, tags: Sequence[str],
                timeout: float = 60.0, jobs: Path = JOBS) -> Iterator[Job]:
    """Run ``verdict_jobs.py MODE`` (or another ``jobs`` script of the same interface) until
    every tag in ``tags`` is ready; kill it after."""
    workdir = tmp_path / f"job-{mode}"
    workdir.mkdir()
    ready = workdir / "ready"
    ready.touch()
    log = workdir / "log"
    with open(log, "wb") as out:
        popen = subprocess.Popen([sys.executable, str(jobs), mode, str(ready), str(workdir)],
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    job = Job(popen.pid, {}, workdir, ready, log)
    try:
        job.wait_for(tags, timeout)
        yield job
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _group_alive(popen.pid) and time.monotonic() < deadline:
            time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def dump_json(pid: int, *extra: str, timeout: float = 120.0) -> str:
    """``python -m hangscope dump PID --format json`` on this checkout; its stdout."""
    done = run_cli("dump", str(pid), "--format", "json", *extra, timeout=timeout)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip(), done.stderr
    return done.stdout


def show_text(data: str, where: Path) -> str:
    """``python -m hangscope show FILE`` of a saved JSON dump: the text report a user reads,
    unwrapped (box edges dropped, whitespace collapsed) so that a sentence is one string."""
    path = where / "dump.json"
    path.write_text(data)
    done = run_cli("show", str(path), env={"COLUMNS": "200"})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.replace("│", " ").split())
