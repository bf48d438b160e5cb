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
