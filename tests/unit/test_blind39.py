"""Blind round 39's jobs, as ``hangscope dump PID --format json`` saved them after this
session's fixes, read again (tests/fixtures/blind/; docs/accuracy.md, round 39).

GIVEN a vLLM-shaped data-parallel engine whose wave woke engine 1 only THEN engine 1 waits in
its step's all_reduce for engine 0, which waits in its input poll: engine 0 the suspect (it
read a deadlock of zmq receives between the front end and the coordinator). GIVEN EarlyStopping
monitoring a metric logged on rank 0 only THEN rank 0 made one collective more: the odd one
(it read "no majority"). GIVEN a driver that sets up a gloo group of two actors one at a time
THEN the driver's loop is the suspect (it named the actor in the rendezvous).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import Role, VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def _titled(snap, prefix: str) -> int:  # type: ignore[no-untyped-def]
    return next(p.pid for p in snap.processes if (p.title or "").startswith(prefix))


def test_given_a_wave_one_engine_missed_then_that_engine_is_the_suspect() -> None:
    snap = analyze(load(FIXTURES / "dp_engine_wave_missed.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    dp0, dp1 = _titled(snap, "EngineCore_DP0"), _titled(snap, "EngineCore_DP1")
    assert verdict.suspects[0] == dp0, verdict
    assert verdict.summary.startswith(f"Wait chain: PID {dp1} (EngineCore_DP1) waits in "
                                      "all_reduce at DPEngineCore._sync_dp"), verdict.summary
    assert "it has not got to the collective" in verdict.summary, verdict.summary


def test_given_a_metric_on_rank_0_only_then_rank_0_made_one_collective_more() -> None:
    snap = analyze(load(FIXTURES / "lightning_rank0_metric_one_apart.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    rank0 = next(p.pid for p in snap.processes if p.role is Role.RANK and p.rank is not None
                 and p.rank.global_rank == 0)
    assert verdict.suspects == (rank0,), verdict
    assert "rank 0 made one collective more than rank 1 before this point" in verdict.summary
    assert "no majority" not in verdict.summary


def test_given_a_group_set_up_one_member_at_a_time_then_the_drivers_loop() -> None:
    snap = analyze(load(FIXTURES / "ray_group_setup_one_at_a_time.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects[0] == snap.job.target, verdict
    assert "gets each member's setup before it submits the next" in verdict.summary
