"""Rollout workers whose gRPC calls dial a server that is not there
(tests/targets/frameworks/grpc_stale.py; blind round 34's 08, grpc#19973, mill#4018).

GIVEN two workers blocked in a unary call with ``wait_for_ready=True`` to an address a stopped
server left behind, while the job's live server listens on another port THEN "a call connected
to no server", the workers the suspects (it read idle: the front end waiting for requests, the
workers taken for processes waiting for work). GIVEN the twin whose workers are connected to
the live server, its handler slow THEN not that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, Target, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "grpc_stale.py"
TAGS = ["server", "worker"]


def test_calls_to_an_address_nobody_serves_are_a_call_connected_to_no_server(
        tmp_path: Path) -> None:
    with verdict_job("stale", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        workers = poll(lambda: _workers(job), "both workers inside their call", 30)
        raw = dump_json(job.launcher)
        server = job.pids["server"]
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert sorted(verdict["suspects"]) == workers, verdict
    summary = verdict["summary"]
    assert summary.startswith("A call connected to no server: PID "), summary
    assert "waits in a gRPC call at worker (grpc_stale.py:" in summary, summary
    assert "the job's servers listen on port " in summary and f"(PID {server} (python))" \
        in summary, summary
    assert "gRPC retries the connection for ever" in summary, summary


def _workers(job: Target) -> list[int] | None:
    """Both workers' PIDs, once both said their call is sent."""
    pids = sorted(int(line.split()[0]) for line in job.ready_lines()
                  if line.split()[1:] == ["worker"])
    return pids if len(pids) == 2 else None


def test_calls_connected_to_a_slow_server_are_not_that(tmp_path: Path) -> None:
    with verdict_job("slow", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        poll(lambda: _workers(job), "both workers inside their call", 30)
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert "connected to no server" not in data["verdict"]["summary"], text
    assert data["verdict"]["kind"] != "idle", text
