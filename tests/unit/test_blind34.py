"""Blind round 34's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 34).

GIVEN rollout workers blocked in a gRPC call with ``wait_for_ready=True`` to the address a
stopped server left in a discovery file, while the new server idles on another port THEN "a
call connected to no server", the workers the suspects (it read idle: a healthy-looking front
end waiting for requests, the workers taken for processes waiting for work).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_calls_dialing_a_stale_address_then_no_server_is_connected() -> None:
    snap = analyze(load(FIXTURES / "grpc_stale_address.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    workers = {p.pid for p in snap.processes if "rollout_worker.py" in " ".join(p.cmdline)}
    assert set(verdict.suspects) == workers and len(workers) == 2, verdict
    assert verdict.summary.startswith("A call connected to no server: PID "), verdict.summary
    assert "the job's servers listen on port 30212" in verdict.summary, verdict.summary
