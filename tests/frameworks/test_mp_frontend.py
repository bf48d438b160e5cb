"""A gRPC front end with torch.multiprocessing model workers behind queues
(tests/targets/frameworks/mp_frontend.py; blind round 31's 08).

GIVEN the front end between requests: its workers loop on the task queue, its collector
thread on the result queue, its main thread in gRPC's ``wait_for_termination``, no client
connected THEN idle, nobody blamed (it read "deadlock": the collector reads the workers'
pipe, the workers read the front end's, and the main thread's serve-until-stopped wait was
taken for a hand-off from the collector). GIVEN a request in flight that a worker keeps
(it answers full batches only) THEN not idle: a wait chain through the front end's queues.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, asleep, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "mp_frontend.py"
TAGS = ["server", "worker0", "worker1", "client"]


def _dump(mode: str, tmp_path: Path) -> tuple[dict, dict[str, int], str]:
    with verdict_job(mode, tmp_path, TAGS, timeout=120, jobs=JOBS) as job:
        pids = dict(job.pids)
        serving = [pids[t] for t in TAGS[:-1]]
        poll(lambda: all(asleep(p) for p in serving), "the front end and its workers asleep",
             60)
        raw = dump_json(pids["server"])
    return json.loads(raw), pids, show_text(raw, tmp_path)


def test_a_front_end_whose_workers_wait_on_their_queues_is_idle(tmp_path: Path) -> None:
    data, pids, text = _dump("idle", tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", (verdict, text)
    assert verdict["suspects"] == [], verdict
    assert f"PID {pids['server']} is idle at serve (mp_frontend.py:" in verdict["summary"], (
        verdict["summary"])


def test_a_request_a_worker_keeps_is_not_idle(tmp_path: Path) -> None:
    data, pids, text = _dump("lost", tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert pids["server"] in verdict["suspects"], verdict
    assert "at serve.<locals>.infer (mp_frontend.py:" in verdict["summary"], verdict["summary"]


def test_a_front_end_whose_client_keeps_its_channel_between_calls_is_idle(
        tmp_path: Path) -> None:
    """gRPC's client keeps its HTTP/2 connection open between calls: the open connection is
    no request; a running handler would be (it read "wait chain" to the front end's serve
    call)."""
    data, _pids, text = _dump("idle_channel", tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", (verdict, text)
    assert "with no handler running a call" in text, text
