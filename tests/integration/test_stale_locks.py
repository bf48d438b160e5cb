"""A stale lock file, on real processes (tests/targets/stale_lock_jobs.py).

Shaped after the stale-lockfile reports (a lock file whose owner crashed, polled for ever:
blind round 10's model cache, pip/conda "waiting for lock" hangs): the holder's PID is in the
log, and no process has it.

GIVEN two writers polling an ``O_EXCL`` lock file whose holder was killed, their log saying
"held by pid N" THEN a wait nobody can end: both writers suspected, PID N named as gone and
the log line quoted, the fix said. GIVEN the same writers waiting for a holder that lives
THEN the lock is not called stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "stale_lock_jobs.py"
TAGS = ["builder", "writer0", "writer1"]


def test_writers_polling_a_lock_whose_holder_died_are_told_it_is_stale(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "crashed", tmp_path, TAGS)
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A wait nobody can end"), summary
    assert "no process" in summary and "the lock is stale" in summary, summary
    assert "held by pid" in summary and "died (SIGKILL)" in summary, summary
    assert sorted(verdict["suspects"]) == sorted([pids["writer0"], pids["writer1"]]), verdict


@pytest.mark.extended
def test_writers_waiting_for_a_live_holder_are_not_told_it_is_stale(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "holding", tmp_path, TAGS)
    assert "the lock is stale" not in data["verdict"]["summary"], data["verdict"]
