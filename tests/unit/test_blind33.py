"""Blind round 33's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 33).

GIVEN an aiohttp WebSocket hub served by ``web.run_app`` and its two subscribers, all idle
between alerts THEN no hang is claimed (it read "a reply that never comes", the hub blamed:
``run_app`` runs the server's loop in ``run_until_complete``, which was taken for the
program's own call awaiting a result).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_an_idle_websocket_hub_then_no_hang_is_claimed() -> None:
    verdict = analyze(load(FIXTURES / "aiohttp_ws_hub_idle.dump.json")).verdict
    assert verdict is not None and verdict.kind in (VerdictKind.IDLE, VerdictKind.UNKNOWN), (
        verdict)
    assert verdict.suspects == (), verdict
