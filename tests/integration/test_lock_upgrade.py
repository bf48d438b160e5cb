"""A shared lock upgraded to an exclusive one deadlocks its thread, on a real job
(tests/targets/rwlock_jobs.py).

GIVEN a readers/writer lock built on a Condition, and a request thread that takes the
exclusive lock while its own outer frame holds the shared one (Waggle-mcp#67), with other
request threads queued behind it, THEN the verdict is a deadlock naming that thread and both
of its frames, not a lost wake-up.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump

JOBS = TARGETS / "rwlock_jobs.py"


def test_a_thread_upgrading_its_shared_lock_is_the_deadlock(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "upgrade", tmp_path, ["store"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [pids["store"]], verdict
    summary = verdict["summary"]
    assert "Thread lookup-2 of PID" in summary, summary
    assert "FeatureStore._refresh" in summary and "FeatureStore.lookup" in summary, summary
    assert "lost wake-up" not in summary.lower(), summary
