"""Blind round 42's jobs, as ``hangscope dump PID --format json`` saved them
(tests/fixtures/blind/; docs/accuracy.md, round 42).

GIVEN two Accelerate ranks downloading one checkpoint into a shared Hub cache from a throttled
mirror: rank 0 holds the cache's file lock and reads the download (data through its TCP
connection within the window), rank 1 polls the lock (huggingface_hub#2543) THEN progressing,
slowly: rank 1 waits for a holder that works (it read "Lock wait", a healthy job called hung).

GIVEN a Ray Data pipeline on a fixed pool of one map actor that exited (``sys.exit`` in its
UDF), the failure ignored (``max_errored_blocks=-1``, ray#62746): the driver waits for the
pipeline's output while its executor thread goes round on 46% of a CPU, every Ray worker
between tasks THEN hung, the stall Ray Data's own line reports: a scheduler thread that moves
while nothing else of the job does hands out no work (it read "progressing").
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_lock_held_across_a_download_that_moves_then_slow_not_hung() -> None:
    verdict = analyze(load(FIXTURES / "accelerate_hub_download_lock_slow.dump.json")).verdict
    assert verdict.kind is VerdictKind.PROGRESSING, verdict
    assert "rank 1 (PID 31602) waits at WeakFileLock (huggingface_hub/utils/_fixes.py:99) for " \
        "rank 0 (PID 31601), which progresses" in verdict.summary, verdict.summary


def test_given_a_ray_data_executor_going_round_with_nothing_to_hand_out_then_a_stall() -> None:
    snap = analyze(load(FIXTURES / "raydata_dead_actor_slot.dump.json"))
    assert snap.progress is not None
    (driver,) = [r for r in snap.progress.ranks if r.pid == 16099]
    assert driver.decision == "stuck", driver
    assert "the framework's scheduler, moved" in driver.reason, driver.reason
    verdict = snap.verdict
    assert verdict.kind is VerdictKind.WAIT_CHAIN and verdict.suspects == (16099,), verdict
    assert "Ray Data ignored a failed task of MapBatches(Embedder)" in verdict.summary
