"""A gRPC model registry whose two-worker pool is held by a replica's Watch streams
(tests/targets/frameworks/grpc_watch.py; blind round 32's 03, grpc#7052).

GIVEN both workers inside Watch handlers waiting for a new version and the trainer's Publish,
which brings it, queued THEN "a server's pool full of calls that never end": three calls on a
pool of two, the registry the suspect (it read a wait chain from the replica, the queued
Publish unsaid). GIVEN four workers THEN not that: versions flow. GIVEN nothing published yet
THEN no hang: a watch waiting for its first event is a subscription, idle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "grpc_watch.py"
TAGS = ["registry", "replica", "trainer"]


def test_streams_that_hold_every_worker_starve_the_call_that_would_end_them(
        tmp_path: Path) -> None:
    with verdict_job("starved", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
        pids = dict(job.pids)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["registry"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("A server's pool full of calls that never end: 3 calls "
                              f"wait on PID {pids['registry']} (python)"), summary
    assert "and all 2 worker threads of its handler pool" in summary, summary
    assert "1 of the calls waits for a free worker" in summary, summary
    assert f"PID {pids['trainer']} (python) at trainer (grpc_watch.py:" in summary, summary


def test_a_pool_with_room_for_every_call_is_not_that(tmp_path: Path) -> None:
    with verdict_job("roomy", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert "pool full of calls" not in data["verdict"]["summary"], text
    assert data["verdict"]["kind"] in ("progressing", "idle", "paused"), (data["verdict"], text)


def test_streams_waiting_for_a_first_update_nobody_publishes_are_not_a_hang(
        tmp_path: Path) -> None:
    """A watch is a subscription: its handler waits for the next event between messages. With
    nothing published yet, it read a wait chain from the replica to the handler's wait."""
    with verdict_job("quiet", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)
    assert data["verdict"]["suspects"] == [], data["verdict"]
