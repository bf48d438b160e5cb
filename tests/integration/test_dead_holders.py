"""A multiprocessing lock whose holder died, on real processes
(tests/targets/dead_holder_jobs.py).

Shaped after the "worker killed while holding a multiprocessing.Lock" reports (blind round
11's KV allocator, cpython's SemLock has no owner-death recovery): forked siblings block on a
lock one of them took and died inside.

GIVEN two workers blocked on a shared ``multiprocessing.Lock`` whose sibling exited with code
134 inside it THEN a lock whose holder died: the dead worker suspected, the waiters and the
log's fatal line said. GIVEN the same lock held by a sibling that lives THEN no dead holder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "dead_holder_jobs.py"


def test_siblings_blocked_on_a_lock_whose_holder_died_name_the_dead_holder(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "died", tmp_path, ["manager", "worker1", "worker2"])
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A lock whose holder died"), summary
    assert "exited with code 134" in summary and "block table corrupt" in summary, summary
    dead = next(p["pid"] for p in data["processes"] if p["state"] == "Z")
    assert verdict["suspects"] == [dead], verdict
    assert f"PID {pids['worker1']} (batch-worker-1)" in summary, summary


@pytest.mark.extended
def test_siblings_waiting_for_a_live_holder_name_no_dead_holder(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "holding", tmp_path,
                           ["manager", "worker0", "worker1", "worker2"])
    assert "holder died" not in data["verdict"]["summary"], data["verdict"]
