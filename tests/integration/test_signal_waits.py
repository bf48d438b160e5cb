"""A signal already gone, on real processes (tests/targets/signal_wait_jobs.py).

Shaped after the check-then-pause race of CPython's signal docs and blind round 10's SIGCHLD
report: a supervisor waits in ``signal.pause()`` for a child's SIGCHLD that came before its
handler was installed.

GIVEN a supervisor asleep in ``signal.pause()`` whose child already exited (a zombie) and two
workers blocked on its pipes THEN a lost wake-up: the supervisor suspected, the pause, the
zombie and the fix said, the workers behind it. GIVEN the same supervisor whose child still
runs THEN no lost wake-up is said: the child's exit will still signal it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "signal_wait_jobs.py"
TAGS = ["supervisor", "uploader0", "uploader1"]


def test_a_pause_for_a_child_that_already_exited_is_a_lost_wakeup(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "missed", tmp_path, TAGS)
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A lost wake-up"), summary
    assert "sleeps in signal.pause()" in summary and "already exited" in summary, summary
    assert "os.waitpid()" in summary, summary
    assert f"PID {pids['uploader0']} (uploader) is blocked reading pipe" in summary, summary
    assert verdict["suspects"] == [pids["supervisor"]], verdict


@pytest.mark.extended
def test_a_pause_while_the_child_runs_is_no_lost_wakeup(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "running", tmp_path, TAGS)
    assert "signal.pause()" not in data["verdict"]["summary"], data["verdict"]
