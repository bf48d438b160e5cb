"""``hangscope watch`` on two NCCL ranks of one H200 (demo/gpu/watch21.py), re-judged here.

tests/fixtures/watch_gpu/ holds what the device wrote: the capture of a job that trained,
paused 14 s for a checkpoint, then hung in mismatched collectives (captured 15 s after the
hang, from NCCL RAS), and the capture the watch wrongly took of a *healthy* loop (a bf16
matmul, an all_reduce, ``.item()`` and a 50 ms sleep per step): its dense samples moved between
``all_reduce`` and the sleep, and the poll-loop rule called it "polling without progress"
because NCCL's socket traffic is invisible to /proc/PID/io and the small kernels leave the SMs
idle. A loop that returns from a collective and goes on is progress: its peers answered.
The second run (``nccl_train_healthy_2``) was captured twice more: rank 0's samples in one
window missed its microsecond NCCL launch, while rank 1 passed through the all_reduce of the
same loop; a collective returns only once every rank has called it.
"""

from __future__ import annotations

import json

import support

from hangscope.analyze import analyze
from hangscope.analyze.evidence.progress import PROGRESSING, STUCK, decide, decide_all
from hangscope.analyze.stall import wait_of
from hangscope.model.serialize import from_dict

CAPTURES = support.FIXTURES / "watch_gpu"


def _snapshot(name: str):  # type: ignore[no-untyped-def]
    return from_dict(json.loads((CAPTURES / f"{name}.json").read_text()))


def test_a_healthy_nccl_loop_is_progressing_not_a_straggler() -> None:
    snap = _snapshot("nccl_train_healthy")
    (reading,) = snap.readings
    evidence = reading.progress
    assert evidence is not None
    for proc in evidence.processes:
        if not proc.threads:
            continue  # the launcher
        got = decide(proc, evidence.seconds, evidence.gpus)
        assert got.decision == PROGRESSING, got.reason
        assert "through all_reduce at train (watch21.py:51)" in got.reason, got.reason
        assert wait_of(proc, got, evidence.seconds) is None  # the watch's clock starts again
    verdict = analyze(snap).verdict
    assert verdict is not None and verdict.kind.value == "progressing", verdict.summary


def test_the_hang_it_captured_stays_a_mismatch_with_stuck_ranks() -> None:
    snap = analyze(_snapshot("nccl_mismatch_hang"))
    assert snap.verdict is not None and snap.verdict.kind.value == "mismatched_collectives"
    assert "NCCL RAS op counts cross" in snap.verdict.summary
    (reading,) = snap.readings
    evidence = reading.progress
    assert evidence is not None
    ranks = [p for p in evidence.processes if p.threads]
    assert len(ranks) == 2
    assert all(decide(p, evidence.seconds, evidence.gpus).decision == STUCK for p in ranks)


def test_a_rank_whose_samples_missed_the_collective_its_peer_completed_is_progressing() -> None:
    snap = _snapshot("nccl_train_healthy_2")
    (reading,) = snap.readings
    evidence = reading.progress
    assert evidence is not None
    alone = {p.pid: decide(p, evidence.seconds, evidence.gpus).decision
             for p in evidence.processes if p.threads}
    assert sorted(alone.values()) == [PROGRESSING, STUCK]  # what the device's watch read
    together = {r.pid: r for r in decide_all(evidence) if r.pid in alone}
    assert {r.decision for r in together.values()} == {PROGRESSING}
    (was_stuck,) = [pid for pid, d in alone.items() if d == STUCK]
    assert "completed all_reduce at train (watch21.py:51) in this window" in (
        together[was_stuck].reason)
    verdict = analyze(snap).verdict
    assert verdict is not None and verdict.kind.value == "progressing", verdict.summary
