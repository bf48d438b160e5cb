"""torch's JIT extension build lock (tests/targets/frameworks/build_lock.py): a lock file a
killed build left behind, and the same two loaders while one of them really builds.

GIVEN two processes loading one C++ extension into one build directory, WHEN the lock file
was left by a killed build (pytorch#189245; blind round 29's 04 read "Compiling... not yet a
hang" for DeepSpeed ranks polling it), THEN a lock wait nobody builds for, both loaders the
suspects, the fix said; WHEN one of them builds (ninja, c++), THEN compiling, not a hang.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest
from support import TARGETS, asleep, dump_json, running_target

pytestmark = pytest.mark.frameworks

JOB = TARGETS / "frameworks" / "build_lock.py"


def _argv(mode: str, workdir: Path) -> list[str]:
    return [sys.executable, str(JOB), mode, str(workdir / "ready"), str(workdir / "build")]


def test_a_lock_file_left_by_a_killed_build_is_a_hang_nobody_builds_for(
        tmp_path: Path) -> None:
    workdir = tmp_path / "stale"
    with running_target(_argv("stale", workdir), workdir, tags=["loader0", "loader1"],
                        ready=lambda t: all(asleep(t.pids[f"loader{i}"]) for i in (0, 1)),
                        timeout=90) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "lock_wait", verdict
    assert sorted(verdict["suspects"]) == sorted((pids["loader0"], pids["loader1"])), verdict
    summary = verdict["summary"]
    assert summary.startswith("A build nobody runs: "), summary
    assert "torch's JIT build lock (FileBaton" in summary, summary
    assert "at load (build_lock.py:" in summary, summary
    assert "Delete that lock file" in summary, summary


def _building(target: object) -> bool:
    """The first loader runs its compiler; the second waits for its lock."""
    pids = target.pids  # type: ignore[attr-defined]
    try:
        below = psutil.Process(pids["loader0"]).children(recursive=True)
    except psutil.Error:
        return False
    return any(p.name() in ("cc1plus", "c++", "g++") for p in below) and asleep(
        pids["loader1"])


def test_a_loader_waiting_while_the_other_builds_is_compiling(tmp_path: Path) -> None:
    workdir = tmp_path / "building"
    with running_target(_argv("building", workdir), workdir, tags=["loader0", "loader1"],
                        ready=_building, timeout=90) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "compiling", verdict
    assert pids["loader0"] in verdict["suspects"], verdict
    assert "; running " in verdict["summary"], verdict["summary"]  # its compilers, named
