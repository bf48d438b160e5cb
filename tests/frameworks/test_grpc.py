"""A gRPC service whose handler calls its own server (tests/targets/frameworks/grpc_jobs.py).

GIVEN every worker of the server's pool inside a nested call to the same server, whose
requests wait in that pool's queue (grpc#8603) THEN a deadlock of a pool that calls its own
server, the server the suspect, its handler's line named, and no lock-order inversion (blind
round 19's 05 read "Local deadlock … a lock-order inversion" from gRPC's own futexes). GIVEN
the nested method served by a second server on its own pool THEN progressing. GIVEN two
services in two processes whose pools call each other (blind round 26's 04) THEN a deadlock of
pools that call each other's servers, the one the client calls the suspect. GIVEN the server
waiting in ``wait_for_termination`` between a probe's calls (blind round 29's 06 read
"unknown") THEN idle, nobody blamed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import psutil
import pytest
from support import TARGETS, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "grpc_jobs.py"


def _idle(pid: int, seconds: float = 1.0) -> None:
    """Wait until ``pid`` used no CPU for ``seconds`` (its workers settled in their calls)."""
    proc = psutil.Process(pid)
    state = {"cpu": sum(proc.cpu_times()[:2]), "since": time.monotonic()}

    def settled() -> bool:
        cpu, now = sum(proc.cpu_times()[:2]), time.monotonic()
        if cpu != state["cpu"]:
            state.update(cpu=cpu, since=now)
        return now - state["since"] >= seconds

    poll(settled, f"PID {pid} off CPU for {seconds} s", 60)


def _deadlock(mode: str, tmp_path: Path, tags: list[str]) -> tuple[str, str]:
    """Dump the job once every server of it is off CPU: its verdict must be a deadlock whose
    suspect is the server the client calls. Its summary and the text report."""
    with verdict_job(mode, tmp_path, tags, jobs=JOBS) as job:
        for tag in tags[:-1]:  # the servers (the client last)
            _idle(job.pids[tag])
        raw = dump_json(job.pids["server"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert verdict["suspects"] == [job.pids["server"]], verdict
    return verdict["summary"], text


def test_a_handler_calling_its_own_server_with_every_worker_taken_is_a_deadlock(
        tmp_path: Path) -> None:
    summary, text = _deadlock("self_call", tmp_path, ["server", "client"])
    assert summary.startswith("Deadlock (a pool that calls its own server): All 2 worker "
                              "threads of "), summary
    assert "wait inside a call at serve.<locals>.translate (grpc_jobs.py:" in summary, summary
    assert "lock-order inversion" not in text, text


def test_a_nested_call_served_by_a_second_pool_is_progressing(tmp_path: Path) -> None:
    with verdict_job("two_servers", tmp_path, ["server", "client"], jobs=JOBS) as job:
        raw = dump_json(job.pids["server"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)


def test_two_services_whose_pools_call_each_other_are_a_deadlock_from_the_entry(
        tmp_path: Path) -> None:
    """The gateway's Translate calls the detector service (a process of its own), whose Detect
    calls the gateway back: both workers of each pool wait inside a call to the other's port
    (blind round 26's 04). A deadlock of pools that call each other's servers, the gateway
    (where the client's requests enter) the suspect."""
    summary, _text = _deadlock("pool_cycle", tmp_path, ["server", "detector", "client"])
    assert summary.startswith("Deadlock (pools that call each other's servers): All 2 worker "
                              "threads of PID "), summary
    assert "wait inside a call at serve.<locals>.translate (grpc_jobs.py:" in summary, summary
    assert "at detector.<locals>.detect_with_terms (grpc_jobs.py:" in summary, summary


def _settled(mode: str, tmp_path: Path) -> tuple[dict, str, dict[str, int]]:  # type: ignore[type-arg]
    """The verdict, the text report and the job's PIDs of a dump of ``mode``'s server once it
    is off CPU (its calls settled)."""
    with verdict_job(mode, tmp_path, ["server", "client"], jobs=JOBS) as job:
        _idle(job.pids["server"])
        raw = dump_json(job.pids["server"])
    return json.loads(raw)["verdict"], show_text(raw, tmp_path), dict(job.pids)


def test_a_server_waiting_for_termination_between_probes_is_idle(tmp_path: Path) -> None:
    verdict, text, pids = _settled("idle", tmp_path)
    assert verdict["kind"] == "idle", (verdict, text)
    assert verdict["suspects"] == [], verdict
    assert f"PID {pids['server']} is idle at serve (grpc_jobs.py:" in verdict["summary"], (
        verdict["summary"])


def test_a_bidi_stream_whose_window_waits_on_a_batch_the_server_never_fills_is_a_chain(
        tmp_path: Path) -> None:
    """The client's request iterator waits on its window (4 chunks unanswered), the handler
    for more requests before it answers (grpc#21737's window on a micro-batching server; blind
    round 30's 01 read "unknown: blocked ... waits on a lock"): the chain from the client's
    response wait through the handler to the iterator's own wait, the client the suspect."""
    verdict, text, pids = _settled("stream_window", tmp_path)
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["client"]], verdict
    summary = verdict["summary"]
    assert "waits on the gRPC call's next response at stream_client (grpc_jobs.py:" in summary, (
        summary)
    assert "waits on the client's next request message at transcribe.<locals>.handler " \
        "(grpc_jobs.py:" in summary, summary
    assert "waits on a lock at stream_client.<locals>.chunks (grpc_jobs.py:" in summary, summary


def test_a_bidi_stream_answered_chunk_by_chunk_is_progressing(tmp_path: Path) -> None:
    with verdict_job("stream_flush", tmp_path, ["server", "client"], jobs=JOBS) as job:
        raw = dump_json(job.pids["server"])
    verdict = json.loads(raw)["verdict"]
    assert verdict["kind"] == "progressing", verdict
