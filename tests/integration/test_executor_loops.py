"""An event loop and its own thread pool waiting for each other, on real processes
(tests/targets/executor_loop_jobs.py).

Shaped after cpython#82318-style reports (a coroutine blocking on an executor future whose
task calls ``run_coroutine_threadsafe`` on that loop) and blind round 10's pool rotation: the
pool worker that waits on the loop is itself a busy executor worker, which must not hide the
loop's edge.

GIVEN a coroutine blocked in ``Future.result()`` of a pool task that waits in
``run_coroutine_threadsafe(...).result()`` THEN a deadlock between the loop's thread and that
worker, the service suspected. GIVEN the same task awaited (``run_in_executor``) THEN no
deadlock.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "executor_loop_jobs.py"


def test_a_loop_blocked_on_a_pool_task_that_waits_for_the_loop_is_a_deadlock(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "blocking", tmp_path, ["service"])
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert verdict["kind"] == "deadlock", verdict
    assert "only the asyncio event loop" in summary and "lookup" in summary, summary
    assert verdict["suspects"] == [pids["service"]], verdict


@pytest.mark.extended
def test_a_pool_task_awaited_by_the_loop_is_no_deadlock(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "awaiting", tmp_path, ["service"])
    assert data["verdict"]["kind"] != "deadlock", data["verdict"]
