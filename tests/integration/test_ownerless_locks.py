"""A lock that every waiter wants and no running thread holds (tests/targets/ownerless_jobs.py).

GIVEN request threads all waiting at one ``with MODEL_LOCK:`` while the lock is held by a
streaming generator suspended inside its own ``with MODEL_LOCK:`` (its client went away),
THEN the verdict says one lock no running thread holds, names the generator's yield from the
source and the log line, and never calls it a lock-order inversion. GIVEN readers waiting on a
cache's lock that ``refresh`` took with ``acquire()`` and left held by an early ``return``,
THEN the same verdict names that return.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, verdict_job

JOBS = TARGETS / "ownerless_jobs.py"


def _verdict(mode: str, tmp_path: Path, tags: list[str], target: str) -> tuple[dict, int]:
    with verdict_job(mode, tmp_path, tags, jobs=JOBS) as job:
        data = json.loads(dump_json(job.pids[target], "--samples", "2", "--window", "1"))
    return data["verdict"], job.pids[target]


def test_given_a_lock_held_by_a_suspended_generator_then_no_inversion_and_the_yield_named(
        tmp_path: Path) -> None:
    verdict, pid = _verdict("suspended", tmp_path, ["handlers", "server"], "server")
    summary = verdict["summary"]
    assert verdict["kind"] == "lock_wait", summary
    assert summary.startswith("A lock nobody running holds: 4 threads wait"), summary
    assert "MODEL_LOCK" in summary and "inversion" in summary.split("Not a ")[1], summary
    assert "lock-order inversion: make" not in summary, summary
    assert "generate_stream (ownerless_jobs.py:" in summary and "yields at line" in summary
    assert "disconnected mid-stream" in summary, summary
    assert verdict["suspects"] == [pid], verdict


@pytest.mark.extended
def test_given_a_lock_an_early_return_left_held_then_that_return_is_named(
        tmp_path: Path) -> None:
    verdict, pid = _verdict("dropped", tmp_path, ["readers", "refresher"], "refresher")
    summary = verdict["summary"]
    assert verdict["kind"] == "lock_wait", summary
    assert "3 threads wait" in summary and "self.lock at Cache.get" in summary, summary
    assert "Cache.refresh (ownerless_jobs.py:" in summary and "`return` at line" in summary
    assert verdict["suspects"] == [pid], verdict
