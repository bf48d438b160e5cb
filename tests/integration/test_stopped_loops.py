"""Futures of an event loop that no longer runs, on real processes
(tests/targets/stopped_loop_jobs.py).

Shaped after the "run_coroutine_threadsafe hangs after loop.stop()" reports (blind round 11's
detokenizer reload): request threads wait in ``Future.result()`` for coroutines handed to a
side loop whose thread has ended.

GIVEN three request threads blocked on ``run_coroutine_threadsafe(...).result()`` of a side
loop that was stopped and whose thread ended THEN a wait nobody can end: the process
suspected, no event loop or pool worker left to complete the futures. GIVEN the same requests
on a running side loop THEN no such verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "stopped_loop_jobs.py"


def test_requests_waiting_on_a_stopped_side_loop_wait_for_ever(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "stopped", tmp_path, ["frontend"])
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A wait nobody can end"), summary
    assert "runs an asyncio event loop or a pool worker" in summary, summary
    assert verdict["suspects"] == [pids["frontend"]], verdict


@pytest.mark.extended
def test_requests_on_a_running_side_loop_are_not_lost(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "running", tmp_path, ["frontend"])
    assert "runs an asyncio event loop" not in data["verdict"]["summary"], data["verdict"]
