"""Blind round 36's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 36).

GIVEN Ray Train workers whose training threads sleep for each step's data while the actors'
main threads wait in Ray's task loop THEN progressing (it read "all waiting": healthy called
hung).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_ray_train_steps_paced_by_a_sleep_then_progressing() -> None:
    snap = analyze(load(FIXTURES / "ray_train_decode_paced.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (), verdict
    ranks = {p.pid: p.working_tid for p in snap.ranks}
    assert snap.progress is not None
    judged = {r.pid: r.tid for r in snap.progress.ranks if r.pid in ranks}
    assert judged == ranks and all(tid != pid for pid, tid in judged.items()), judged
