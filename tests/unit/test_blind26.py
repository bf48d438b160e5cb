"""Blind round 26's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 26).

GIVEN two gRPC services in two processes whose thread pools call each other (a ranker's
handler calls a feature service, whose handler calls the ranker back; grpc#8603), every
worker of both pools blocked in a call to the other's port, THEN a deadlock of pools that call
each other's servers, read from the ranker, where the load test's requests enter. GIVEN
torch.distributed.rpc servers whose every RPC thread waits in a nested rpc_sync, THEN a deadlock
of RPC threads all waiting on nested calls.
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


def test_given_rpc_servers_whose_every_thread_waits_on_a_nested_rpc_then_a_deadlock() -> None:
    """torch.distributed.rpc parameter servers (ranks 1-2) whose 4 RPC threads each run a
    lookup blocked in a nested rpc_sync to the other server (pytorch#26362); their main threads
    are in rpc.shutdown and read nothing, the pool's threads say it."""
    snap = analyze(load(BLIND / "rpc_nested_pool_exhausted.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    servers = {p.pid for p in snap.ranks if p.rank is not None and p.rank.global_rank in (1, 2)}
    assert set(verdict.suspects) <= servers and verdict.suspects, verdict
    assert verdict.summary.startswith("Deadlock (RPC threads all waiting on nested calls): All 4 "
                                      "RPC threads of rank 1"), verdict.summary
    assert "nested rpc_sync at lookup (train.py:65)" in verdict.summary, verdict.summary
