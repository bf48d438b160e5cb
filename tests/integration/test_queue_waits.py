"""A put into a full multiprocessing queue waits for the process that reads it, on real jobs
(tests/targets/queue_jobs.py).

GIVEN data workers blocked putting into a full queue while their trainer sleeps through a
maintenance window (ray#64360's pause), THEN the job is paused, never hung. GIVEN an async
checkpointer that queues every shard before it reads its writer's acks, both queues bounded
(afl-kit#10's two full queues), THEN the verdict is a deadlock between the saver and its
writer, each waiting to put.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "queue_jobs.py"


@pytest.mark.extended
def test_workers_blocked_on_a_full_queue_of_a_sleeping_trainer_are_paused(
        tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "paused_full", tmp_path, ["trainer", "worker0", "worker1"])
    assert data["verdict"]["kind"] == "paused", data["verdict"]


def test_two_bounded_queues_each_blocked_putting_are_a_deadlock(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "acks_full", tmp_path, ["saver", "writer"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) <= {pids["saver"], pids["writer"]}, verdict
    assert verdict["summary"].count("waits to put into a full multiprocessing.Queue") == 2, \
        verdict["summary"]
