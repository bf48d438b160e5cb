"""Blind round 32's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 32).

GIVEN a vLLM-style front end whose forked engine core makes its sockets on the zmq context the
front end made at import (pyzmq#1049) THEN the engine is named: it runs no zmq I/O thread, so
its sockets never connect (it read "unknown"). GIVEN a Lightning DDP script that sets its own
"free" MASTER_PORT in every process (Lightning#3957) THEN a split rendezvous, rank 1 (whose
store nobody serves) the suspect (it read "all waiting", nobody blamed). GIVEN a uvicorn server
rolled by SIGTERM whose graceful shutdown waits for an endless SSE stream (uvicorn#451) THEN
its shutdown never finished, the server the suspect (it read "unknown"). GIVEN a gRPC registry
whose two workers are held by Watch streams while the Publish that would wake them is queued
(grpc#7052) THEN the pool full of calls, the registry the suspect (a partial wait chain).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_an_engine_on_an_inherited_zmq_context_then_it_is_the_suspect() -> None:
    snap = analyze(load(FIXTURES / "zmq_forked_context.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    engine = next(p for p in snap.processes if p.ppid != 1 and p.ppid in
                  {q.pid for q in snap.processes})
    assert verdict.suspects == (engine.pid,), verdict
    assert "it runs no zmq I/O thread (ZMQbg/IO; fork copies only the calling thread)" in (
        verdict.summary), verdict.summary


def test_given_ranks_on_different_store_ports_then_a_split_rendezvous() -> None:
    snap = analyze(load(FIXTURES / "lightning_port_per_process.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    assert verdict.summary.startswith("Split rendezvous: "), verdict.summary
    rank1 = next(p.pid for p in snap.processes if p.rank and p.rank.global_rank == 1)
    assert verdict.suspects == (rank1,), verdict


def test_given_a_server_draining_an_endless_stream_then_its_shutdown_never_finished() -> None:
    """uvicorn#451: SIGTERM, then a graceful shutdown that waits for an endless SSE response
    the dashboard keeps reading; the supervisor waits for the server to exit."""
    snap = analyze(load(FIXTURES / "uvicorn_drain_sse.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    server = next(p.pid for p in snap.processes if "server.py" in " ".join(p.cmdline))
    assert verdict.suspects == (server,), verdict
    assert verdict.summary.startswith(f"Shutdown never finished: PID {server} (python) "
                                      "logged \"Waiting for connections to close.\""), verdict


def test_given_streams_holding_a_grpc_pool_then_the_queued_call_is_said() -> None:
    """grpc#7052: two Watch streams hold both workers of the registry's pool; the trainer's
    Publish, which would wake them, waits in the pool's queue."""
    snap = analyze(load(FIXTURES / "grpc_watch_pool.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    registry = next(p.pid for p in snap.processes if "registry.py" in " ".join(p.cmdline))
    assert verdict.suspects == (registry,), verdict
    assert verdict.summary.startswith("A server's pool full of calls that never end: 3 "
                                      f"calls wait on PID {registry} (python)"), verdict.summary
