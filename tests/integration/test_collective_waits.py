"""A collective waits for the rank of its group that is in none, on real gloo jobs
(tests/targets/collective_waits.py).

GIVEN ranks 0 and 2 in all_reduce, each with a checkpoint writer idle on its queue, and rank 1
blocked putting a shard into a full queue its writer never drains (async checkpointers,
torchtitan/DCP style), THEN the suspect is rank 1 (or its writer), never rank 0 or 2 behind
their idle writers. GIVEN rank 0 holding a flock while it waits in barrier, and rank 1 waiting
for its uploader child, which waits for that flock, THEN the verdict is a deadlock through the
collective and names rank 0, the lock's holder. GIVEN each rank holding its state lock across a
collective in one thread while its other thread waits for it THEN a deadlock across ranks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, verdict_job

JOBS = TARGETS / "collective_waits.py"


def test_ranks_in_all_reduce_wait_for_the_rank_blocked_on_its_full_checkpoint_queue(
        tmp_path: Path) -> None:
    tags = ["launcher", "rank0", "rank1", "rank2", "writer0", "writer1", "writer2"]
    with verdict_job("writer_stuck", tmp_path, tags, timeout=120, jobs=JOBS) as job:
        data = json.loads(dump_json(job.pids["launcher"]))
    verdict = data["verdict"]
    assert verdict["kind"] not in ("progressing", "idle", "paused", "unknown"), verdict
    assert verdict["suspects"], verdict
    assert set(verdict["suspects"]) <= {job.pids["rank1"], job.pids["writer1"]}, verdict
    assert "rank 1" in verdict["summary"] and "in all_reduce" in verdict["summary"], \
        verdict["summary"]


@pytest.mark.extended
def test_a_flock_held_across_a_barrier_that_a_rank_waits_behind_is_a_deadlock(
        tmp_path: Path) -> None:
    tags = ["launcher", "rank0", "rank1", "rank2", "uploader"]
    with verdict_job("lock_cycle", tmp_path, tags, timeout=120, jobs=JOBS) as job:
        data = json.loads(dump_json(job.pids["launcher"]))
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"][0] == job.pids["rank0"], verdict
    assert "index.lock" in verdict["summary"] and "barrier" in verdict["summary"], verdict


def test_a_lock_held_across_collectives_by_two_threads_of_each_rank_is_a_deadlock(
        tmp_path: Path) -> None:
    """KempnerForge#104, torchcomms#586 (blind round 36's 03): rank 0's snapshot thread holds
    its state lock in all_gather on its own group; ranks 1 and 2 hold theirs in the gradient
    all_reduce; each rank's other thread waits for its lock. It read "mismatched collectives",
    no side the odd one."""
    tags = ["launcher", "rank0", "rank1", "rank2"]
    with verdict_job("snapshot_lock", tmp_path, tags, timeout=120, jobs=JOBS) as job:
        data = json.loads(dump_json(job.pids["launcher"]))
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    summary = verdict["summary"]
    assert "for thread snapshotter of rank " in summary, summary
    assert "(the same name as state_lock: a lock handed to an object)" in summary or \
        "(the same name as self.state_lock: a lock handed to an object)" in summary, summary
    assert "Never hold a lock across a collective" in summary, summary
