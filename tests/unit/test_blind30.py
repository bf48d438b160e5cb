"""Blind round 30's jobs and their real-library twins, as ``hangscope dump PID --format json``
saved them, read again (tests/fixtures/blind/, tests/fixtures/frameworks/; docs/accuracy.md,
round 30).

GIVEN an aiohttp client whose ``gather`` of 12 gets through ``TCPConnector(limit=8)`` holds
every connection with an unread body, its uvicorn server waiting for room to send on them
(aiohttp#1623) THEN a wait chain from the server to the client, which stopped reading, the
client the suspect (it read "unknown": both loops idle in epoll). GIVEN a client reading its
download chunk by chunk, its loop sampled once in asyncio's transport callback THEN
progressing, by the socket data its loop moved (it read "unknown: blocked").
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_given_a_client_that_stopped_reading_its_pooled_connections_then_it_is_the_suspect(
        ) -> None:
    snap = analyze(load(FIXTURES / "blind" / "aiohttp_connector_limit.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    client = next(p.pid for p in snap.processes if "download_shards.py" in " ".join(p.cmdline))
    assert verdict.suspects == (client,), verdict
    assert f"to PID {client} (python), which stopped reading it" in verdict.summary, verdict


def test_given_a_loop_sampled_moving_socket_data_then_progressing() -> None:
    snap = analyze(load(FIXTURES / "frameworks" / "aiohttp_slow_reader_sampled.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert "its event loop moves socket data" in verdict.summary, verdict
    assert snap.progress is not None
    assert {r.evidence for r in snap.progress.ranks} == {"socket"}, snap.progress
