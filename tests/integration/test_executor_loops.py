"""An event loop and its own thread pool waiting for each other, on real processes
(tests/targets/executor_loop_jobs.py).

Shaped after cpython#82318-style reports (a coroutine blocking on an executor future whose
task calls ``run_coroutine_threadsafe`` on that loop) and blind round 10's pool rotation: the
pool worker that waits on the loop is itself a busy executor worker, which must not hide the
loop's edge.

GIVEN a coroutine blocked in ``Future.result()`` of a pool task that waits in
``run_coroutine_threadsafe(...).result()`` THEN a deadlock between the loop's thread and that
worker, the service suspected. GIVEN the same task awaited (``run_in_executor``) THEN no
deadlock. GIVEN a pool whose every worker waits on tasks it submitted to that same pool
THEN a pool starved by its own tasks, the crawler suspected; GIVEN enough workers THEN
progressing.
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


def test_a_pool_whose_every_worker_waits_on_its_own_tasks_is_starved(tmp_path: Path) -> None:
    """Blind round 18's 02 (an asyncio service's executor, its loop idle) read "a future that
    only the asyncio event loop can complete"; here a crawler with no loop at all."""
    data, pids = settled_dump(JOBS, "nested", tmp_path, ["crawler"])
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A pool starved by its own tasks: All 3 worker threads of "), summary
    assert "block in Future.result() at crawl_site (executor_loop_jobs.py:" in summary, summary
    assert verdict["suspects"] == [pids["crawler"]], verdict


@pytest.mark.extended
def test_a_pool_with_workers_to_spare_for_its_own_tasks_progresses(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "nested_ok", tmp_path, ["crawler"])
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
