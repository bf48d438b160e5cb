"""A client whose main thread waits on its thread pool's requests to a FastAPI micro-batcher
(tests/targets/frameworks/batch_clients.py; blind round 34's 06, ray#33052).

GIVEN the batch window computed from two clocks, so 3 requests never make a batch THEN a wait
chain from the client's main thread, through the pool thread's request, to the server whose
loop idles with the request's coroutine suspended, the server the suspect (it read unknown:
the main thread's ``Future.result()`` had no edge to the pool's tasks). GIVEN one clock THEN
progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "batch_clients.py"
TAGS = ["server", "client"]


def test_requests_of_a_pool_to_a_batch_that_never_runs_lead_to_the_server(
        tmp_path: Path) -> None:
    with verdict_job("stalled", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
        pids = dict(job.pids)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["server"]], verdict
    summary = verdict["summary"]
    assert f"Thread MainThread of PID {pids['client']} (python) waits in Future.result() at " \
        "client (batch_clients.py:" in summary, summary
    assert "for the thread-pool task that thread embed_" in summary, summary
    assert f"the asyncio loop of PID {pids['server']} (python) is idle, not blocked: the " \
        "request's coroutine is suspended" in summary, summary


def test_requests_of_a_pool_to_a_batch_that_runs_progress(tmp_path: Path) -> None:
    with verdict_job("flowing", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)
