"""Blind round 29's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 29).

GIVEN two DeepSpeed ranks whose CPU Adam op's JIT build waits for torch's FileBaton lock file,
left behind by a build killed halfway (pytorch#189245), with no compiler running and both
ranks polling off CPU THEN a lock wait that nobody builds for, both ranks the suspects (it
read "Compiling ... not yet a hang"). GIVEN a gRPC server in ``wait_for_termination`` whose
poller and pool wait for the next call, and a probe asleep between its calls THEN idle,
nobody blamed (it read "unknown": "Blocked: ... waits on a lock at _wait_once").
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

BLIND = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_ranks_polling_a_build_lock_nobody_builds_for_then_a_hang() -> None:
    snap = analyze(load(BLIND / "ds_stale_build_lock.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.LOCK_WAIT, verdict
    ranks = tuple(p.pid for p in snap.ranks)
    assert len(ranks) == 2 and sorted(verdict.suspects) == sorted(ranks), verdict
    assert verdict.summary.startswith("A build nobody runs: ranks 0-1 wait for torch's JIT "
                                      "build lock (FileBaton"), verdict.summary
    assert "at <module> (train.py:36)" in verdict.summary, verdict.summary


def test_given_a_grpc_server_waiting_for_termination_then_idle() -> None:
    snap = analyze(load(BLIND / "grpc_server_idle.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.IDLE, verdict
    assert verdict.suspects == (), verdict
    assert "is idle at main (server.py:68)" in verdict.summary, verdict.summary
