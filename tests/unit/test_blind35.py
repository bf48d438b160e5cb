"""Blind round 35's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 35).

GIVEN a torch RPC parameter server whose main thread waits in ``rpc.shutdown()`` while its RPC
threads apply the trainers' updates, its ``mp.spawn`` parent reading its error pipe THEN
progressing (it read a wait chain from the launcher to the PS: healthy called hung).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_parameter_server_in_its_shutdown_barrier_serving_trainers_then_healthy() -> None:
    verdict = analyze(load(FIXTURES / "rpc_ps_serving_shutdown.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (), verdict
