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


def test_given_req_front_ends_whose_router_drops_the_delimiter_then_connected_to_nothing() -> None:
    """zguide#797: the ROUTER answers [identity, body]; each REQ drops the reply and its
    connection (it read unknown, "Blocked: ...")."""
    snap = analyze(load(FIXTURES / "zmq_req_bare_reply.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    fronts = {p.pid for p in snap.processes if "frontend.py" in " ".join(p.cmdline)}
    assert set(verdict.suspects) == fronts and len(fronts) == 2, verdict
    assert verdict.summary.startswith("A zmq socket connected to nothing: "), verdict.summary
    assert "listens on 19310 with nobody connected" in verdict.summary, verdict.summary


def test_given_two_replicas_binding_one_ipc_path_then_the_first_has_no_peer() -> None:
    """libzmq#2059: the second bind takes the paths over (it read "behind its siblings")."""
    snap = analyze(load(FIXTURES / "zmq_ipc_twin_binds.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.summary.startswith("A zmq socket connected to nothing: PID "), verdict
    assert "waits in a zmq send at main (frontend.py:63)" in verdict.summary, verdict.summary
    assert "a second bind of an ipc:// path succeeds silently" in verdict.summary


def test_given_gpu_tasks_waiting_on_gpu_subtasks_then_tasks_nobody_runs_names_them() -> None:
    """ray#5790: both GPU tasks block in ray.get on subtasks that need a GPU; Ray gives back
    their CPUs only (it read a wait chain ending "waits on a lock" in the task's get)."""
    snap = analyze(load(FIXTURES / "ray_gpu_nested_get.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    shards = {p.pid for p in snap.processes if p.title == "ray::embed_shard"}
    assert set(verdict.suspects) == shards and len(shards) == 2, verdict
    assert verdict.summary.startswith("Tasks nobody runs: "), verdict.summary
    assert "not its GPUs" in verdict.summary, verdict.summary


def test_given_pool_requests_to_a_batch_that_never_runs_then_the_server_is_the_suspect() -> None:
    """ray#33052: the batch window is decades long; the indexer's main thread waits on its
    pool's requests (it read unknown: no edge from ``Future.result()`` to the pool's tasks)."""
    snap = analyze(load(FIXTURES / "fastapi_batch_two_clocks.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    server = next(p.pid for p in snap.processes if "server.py" in " ".join(p.cmdline))
    assert verdict.suspects == (server,), verdict
    assert "waits in Future.result() at main (indexer.py:27) for the thread-pool task" in (
        verdict.summary), verdict.summary
    assert "the request's coroutine is suspended" in verdict.summary, verdict.summary
