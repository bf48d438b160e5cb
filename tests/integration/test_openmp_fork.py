"""Pool workers forked after torch's OpenMP thread team ran (tests/targets/openmp_fork.py;
blind round 43's 03, pytorch/pytorch#17199).

GIVEN a parent that ran a parallel torch op, then a fork-started Pool whose workers run one
THEN each worker waits in libgomp, named from its native frames, the pool that ran in the
parent and the start method to use (it read "the lock at normalise", a Python lock fork left
held, and named the torch binding above the wait). GIVEN 'spawn' THEN busy, not hung.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_verdict

JOBS = TARGETS / "openmp_fork.py"


def test_pool_workers_forked_after_openmp_ran_wait_in_libgomp(tmp_path: Path) -> None:
    got = job_verdict("fork", tmp_path, ["main"], JOBS, timeout=90, sleepers=2)
    verdict, text = got.verdict, got.text
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert sorted(verdict["suspects"]) == sorted(got.sleepers), verdict
    summary = verdict["summary"]
    assert "in native code of libgomp" in summary or "(libgomp" in summary, summary
    assert "a lock of GNU OpenMP's thread pool (libgomp, under torch's CPU operators), which " \
        f"ran in PID {got.launcher} (python) before it forked" in summary, summary
    assert "start the workers with 'spawn' or 'forkserver'" in summary, summary


@pytest.mark.extended
def test_pool_workers_spawned_after_openmp_ran_progress(tmp_path: Path) -> None:
    got = job_verdict("spawn", tmp_path, ["main"], JOBS, timeout=90)
    assert got.verdict["kind"] == "progressing", (got.verdict, got.text)
