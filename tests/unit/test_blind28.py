"""Blind round 28's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 28).

GIVEN uvicorn whose FastAPI lifespan awaits its endless update consumer before ``yield``
(uvicorn#2751): it logged "Waiting for application startup." and never "Application startup
complete.", nothing listens on its --port, its loop wakes for each update THEN "Startup never
finished", the server the suspect (it read "progressing": the loop's wake-ups).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

BLIND = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_uvicorn_lifespan_that_never_yields_then_startup_never_finished() -> None:
    snap = analyze(load(BLIND / "uvicorn_lifespan_never_yields.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    server = snap.job.target
    assert verdict.suspects == (server,), verdict
    assert verdict.summary.startswith(
        f"Startup never finished: PID {server} (python3) logged \"Waiting for application "
        "startup.\" and never \"Application startup complete.\""), verdict.summary
    assert "nothing listens on port 18887" in verdict.summary, verdict.summary


def test_given_streaming_splits_read_one_after_the_other_then_the_stall_ray_data_reported(
        ) -> None:
    """The driver reads split 0 alone; Ray Data's coordinator waits in its barrier for split
    1's consumer and warned in the log (ray#42008): the driver is the suspect, with Ray Data's
    words (it read "all waiting", nobody blamed)."""
    snap = analyze(load(BLIND / "raydata_split_sequential.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (snap.job.target,), verdict
    assert verdict.summary.startswith(
        "A stall its framework reported: the main process (PID "), verdict
    assert "(called from main (driver.py:30))" in verdict.summary, verdict.summary
    assert "split 0 waits for the others" in verdict.summary, verdict.summary


def test_given_streaming_splits_read_at_once_then_progressing() -> None:
    """The twin: a thread per split; the driver's main thread waits on an Event, its consumer
    threads on Ray Data's queues, which its prefetch threads fill from ``ray.get`` on the
    split coordinator, which works (it read "a lost wake-up": the library's threads were left
    out of the ones that could wake the program's)."""
    snap = analyze(load(BLIND.parent / "frameworks" / "raydata_split_concurrent.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert "(ray actor SplitCoordinator.get), which works" in verdict.summary, verdict.summary


def test_given_a_loader_waiting_for_a_stream_between_rotations_then_paused() -> None:
    """The trainer waits on its DataLoader (its get times out once in the window to check its
    workers), the workers, which the window did not watch, on the shipper over ZMQ, and the
    shipper sleeps until its next rotation: paused (it read "unknown: blocked")."""
    snap = analyze(load(BLIND / "loader_stream_rotation_idle.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PAUSED, verdict
    assert verdict.suspects == (), verdict
    assert "is paused at wait_for_next_rotation (online_train.py:37)" in verdict.summary


def test_given_a_pad_under_a_test_of_rank_1s_own_data_then_rank_1_is_the_odd_one() -> None:
    """Rank 1 waits in the all_gather of ``pad_across_processes`` under ``if preds.shape[1] <
    MAX_NEW`` inside its loop; rank 0, whose answers are never short, finished the loop and
    waits in ``wait_for_everyone``'s barrier (accelerate#1110). The line's ``if`` inside the
    loop (``Frame.branches``) says the collective is data-dependent: rank 1 is the odd one (it
    read rank 0, "ran fewer steps")."""
    snap = analyze(load(BLIND / "accelerate_pad_branch_rank1.dump.json"))
    verdict = snap.verdict
    rank1 = next(p.pid for p in snap.ranks if p.rank is not None and p.rank.global_rank == 1)
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    assert verdict.suspects == (rank1,), verdict
    assert ("Rank 1 waits under `if preds.shape[1] < MAX_NEW` (evaluate.py:65) inside the loop"
            in verdict.summary), verdict.summary
