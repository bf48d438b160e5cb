"""A Pool whose result-handler thread died, on a real job (tests/targets/pool_jobs.py).

GIVEN ``Pool.map`` waiting while its workers idle, because a worker's exception could not be
unpickled and killed the Pool's ``_handle_results`` thread (cpython#103061), THEN the verdict
says the result-handler thread is gone, not that a task was lost. GIVEN a ProcessPoolExecutor
whose every worker waits on a Manager Event that only a task queued behind them would set,
THEN the driver is the suspect and the pool's order is named, not the Manager.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "pool_jobs.py"


def test_a_pool_whose_result_handler_died_is_named(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "unpicklable", tmp_path, ["parent"])
    verdict = data["verdict"]
    assert verdict["suspects"] == [pids["parent"]], verdict
    assert "result-handler thread (_handle_results) is gone" in verdict["summary"], verdict


@pytest.mark.extended
def test_a_pool_whose_workers_wait_for_a_task_queued_behind_them_is_starved(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "starved", tmp_path, ["driver", "worker0", "worker1"])
    verdict = data["verdict"]
    assert verdict["suspects"] == [pids["driver"]], verdict
    assert "A task still queued behind them" in verdict["summary"], verdict["summary"]


def test_an_imap_iterable_that_waits_on_its_own_pool_is_named(tmp_path: Path) -> None:
    """Blind round 40's 05 (python/cpython#84291): the iterable given to ``Pool.imap`` calls
    ``pool.apply`` on the same pool; imap runs it in the task-handler thread, the one that
    hands tasks to the workers (it read "the task was lost")."""
    data, pids = settled_dump(JOBS, "imap_feed", tmp_path, ["parent"])
    verdict = data["verdict"]
    assert verdict["suspects"] == [pids["parent"]], verdict
    summary = verdict["summary"]
    assert "the Pool's task-handler thread (_handle_tasks) runs the iterable the tasks come " \
        "from, and it waits there on the same pool at imap_feed.<locals>.records " \
        "(pool_jobs.py:" in summary, summary
    assert "the task was lost" not in summary and "BrokenProcessPool" not in summary, summary
