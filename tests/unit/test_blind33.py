"""Blind round 33's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 33).

GIVEN an aiohttp WebSocket hub served by ``web.run_app`` and its two subscribers, all idle
between alerts THEN no hang is claimed (it read "a reply that never comes", the hub blamed:
``run_app`` runs the server's loop in ``run_until_complete``, which was taken for the
program's own call awaiting a result). GIVEN 48 sync long polls holding AnyIO's 40 worker
threads while the executor's /claim waits for one (anyio#721) THEN a server's pool full of
calls, the API the suspect (it read a wait chain ending at the clients).
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


def test_given_sync_long_polls_holding_every_anyio_thread_then_the_pool_is_said() -> None:
    """anyio#721: 48 long polls on a sync endpoint hold AnyIO's 40 worker threads; the
    executor's sync /claim waits for one (it read a wait chain ending at the clients)."""
    snap = analyze(load(FIXTURES / "fastapi_anyio_pool.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    server = next(p.pid for p in snap.processes if "server.py" in " ".join(p.cmdline))
    assert verdict.suspects == (server,), verdict
    assert verdict.summary.startswith("A server's pool full of calls that never end: 49 calls "
                                      f"wait on PID {server} (python)"), verdict.summary


def test_given_actors_whose_constructor_waits_for_their_own_method_then_that_is_said() -> None:
    """ray#7379: each FeatureShard's ``__init__`` waits for its loader, which waits for the
    config only ``configure`` hands it; the driver's ``configure`` waits in the actor's queue
    (it read "a lost wake-up", with advice about the order of notify and wait)."""
    snap = analyze(load(FIXTURES / "ray_actor_init_waits_own_method.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    actors = {p.pid for p in snap.processes if p.title == "ray::FeatureShard.__init__"}
    assert len(verdict.suspects) == 1 and set(verdict.suspects) <= actors, verdict
    assert verdict.summary.startswith(
        "A call queued behind a constructor that never returns: Thread MainThread of the main "
        "process"), verdict.summary
    assert "to run configure, which it submitted;" in verdict.summary, verdict.summary
    assert "it waits at FeatureShard.__init__ (job.py:24); its thread shard-" in verdict.summary
