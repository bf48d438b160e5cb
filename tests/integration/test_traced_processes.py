"""A process held in a ptrace stop by a tracer that waits on it, on real processes
(tests/targets/traced_jobs.py).

Shaped after py-spy#390-style reports and blind round 11's stack-sampler sidecar: a native
sampler attaches to its parent, then writes its report to a pipe only the stopped parent
reads. hangscope must read such a tracer without pausing it: py-spy's own ptrace stop of the
tracer interrupts its blocked write, which ended that hang in round 11 and left a report that
called the job progressing.

GIVEN the worker held in a ptrace stop (state t) by its sampler child blocked writing the
pipe the worker reads THEN the dump leaves both as they were (the worker still in state t,
the sampler still in its write), and the verdict names the tracer: a chain from the sampler's
write to the worker held in its ptrace stop, the sampler named as the tracer, ``kill``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support import TARGETS, dump_json, running_target

JOBS = TARGETS / "traced_jobs.py"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def _wchan(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return "?"


def test_a_tracer_waiting_on_its_tracee_is_read_without_pausing_it(tmp_path: Path) -> None:
    workdir = tmp_path / "job"
    with running_target([sys.executable, str(JOBS), "stuck", str(workdir / "ready"),
                         str(workdir)], workdir, tags=["worker", "sampler"], timeout=60,
                        ready=lambda t: _state(t.pids["worker"]) == "t"
                        and "pipe_write" in _wchan(t.pids["sampler"])) as job:
        worker, sampler = job.pids["worker"], job.pids["sampler"]
        data = json.loads(dump_json(job.launcher, "--samples", "2", "--window", "0.5"))
        # THEN the hang is as it was: the dump did not interrupt the tracer's write
        assert _state(worker) == "t" and "pipe_write" in _wchan(sampler)
    summary = data["verdict"]["summary"]
    assert f"PID {sampler} (frame-sampler) is blocked writing" in summary, summary
    assert "its tracer (TracerPid), holds it in a ptrace stop" in summary, summary
    assert f"kill {sampler}" in summary, summary
    proc = next(p for p in data["processes"] if p["pid"] == worker)
    assert proc["tracer"] == sampler, proc["tracer"]
