"""Blind round 30's jobs and their real-library twins, as ``hangscope dump PID --format json``
saved them, read again (tests/fixtures/blind/, tests/fixtures/frameworks/; docs/accuracy.md,
round 30).

GIVEN an aiohttp client whose ``gather`` of 12 gets through ``TCPConnector(limit=8)`` holds
every connection with an unread body, its uvicorn server waiting for room to send on them
(aiohttp#1623) THEN a wait chain from the server to the client, which stopped reading, the
client the suspect (it read "unknown": both loops idle in epoll). GIVEN a client reading its
download chunk by chunk, its loop sampled once in asyncio's transport callback THEN
progressing, by the socket data its loop moved (it read "unknown: blocked"). GIVEN a gRPC
bidi stream whose client keeps 4 requests unanswered while the server's handler answers only
full batches (grpc#21737) THEN a wait chain: the client's response wait, the handler's wait for
the next request, the client's request iterator in its own wait; the client the suspect (it
read "unknown").
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
    assert "PIDs 6709, 6710: their event loops move socket data" in verdict.summary, verdict
    assert snap.progress is not None
    assert {r.evidence for r in snap.progress.ranks} == {"socket"}, snap.progress


def test_given_a_bidi_stream_each_side_waiting_for_the_other_then_the_chain_names_both() -> None:
    snap = analyze(load(FIXTURES / "blind" / "grpc_bidi_window.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    client = next(p.pid for p in snap.processes if "run_pipeline.py" in " ".join(p.cmdline))
    assert verdict.suspects == (client,), verdict
    assert "waits on the gRPC call's next response at main (run_pipeline.py:51)" in (
        verdict.summary), verdict.summary
    assert "waits on the client's next request message at transcribe (asr_server.py:42)" in (
        verdict.summary), verdict.summary
    assert "waits on a lock at main.<locals>.request_stream (run_pipeline.py:44)" in (
        verdict.summary), verdict.summary


def test_given_rank_0_alone_in_ddp_forwards_buffer_broadcast_then_the_op_and_the_fix() -> None:
    """pytorch#54059: rank 0 validates through the DDP wrapper, whose forward broadcasts the
    BatchNorm buffers, rank 1 waits in barrier (it read "waits in a collective ... call it on
    every rank", a call the program never made)."""
    snap = analyze(load(FIXTURES / "blind" / "ddp_forward_rank0_broadcast.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    assert verdict.summary.startswith("Mismatched collectives: rank 0 waits in broadcast at "
                                      "evaluate (train.py:44)"), verdict.summary
    assert "through the wrapped module (model.module)" in verdict.summary, verdict.summary


def test_given_a_ray_actor_alone_in_a_collective_then_its_idle_gloo_peer_is_said() -> None:
    """OpenRLHF#135: the rank-0 actor all-reduces two stats more than its peer, which idles
    between tasks (it read "waits in all_reduce", its peer not said)."""
    snap = analyze(load(FIXTURES / "blind" / "ray_collective_extra.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (1279,), verdict
    assert "PID 1278 (ray actor PolicyTrainer), its peer in the gloo group (connected over " \
        "TCP), is in no collective: it idles between tasks at Worker.main_loop" in (
            verdict.summary), verdict.summary
