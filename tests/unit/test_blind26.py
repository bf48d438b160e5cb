"""Blind round 26's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 26).

GIVEN two gRPC services in two processes whose thread pools call each other (a ranker's
handler calls a feature service, whose handler calls the ranker back; grpc#8603), every
worker of both pools blocked in a call to the other's port, THEN a deadlock of pools that call
each other's servers, read from the ranker, where the load test's requests enter.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

BLIND = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_two_services_whose_pools_call_each_other_then_a_deadlock_from_the_entry() -> None:
    snap = analyze(load(BLIND / "grpc_two_pools_cycle.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    ranker = next(p.pid for p in snap.processes if "ranker" in p.cmdline)
    features = next(p.pid for p in snap.processes if "features" in p.cmdline)
    assert verdict.suspects == (ranker,), verdict
    summary = verdict.summary
    assert summary.startswith("Deadlock (pools that call each other's servers): All 4 worker "
                              f"threads of PID {ranker} "), summary
    assert summary.index("Ranker.Rank (service.py:51)") < summary.index(
        f"to PID {features} (python)'s port 18865") < summary.index(
        "Features.GetFeatures (service.py:76)"), summary
