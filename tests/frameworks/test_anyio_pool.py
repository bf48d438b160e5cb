"""A FastAPI job queue whose sync long polls hold every AnyIO worker thread
(tests/targets/frameworks/anyio_pool.py; blind round 33's 04, anyio#721, fastapi#4221).

GIVEN 44 long polls on a sync endpoint, 40 of them on AnyIO's 40 worker threads, and the
executor's sync ``/claim`` waiting for a thread THEN "a server's pool full of calls that never
end", the API the suspect (it read a wait chain ending at the clients' process). GIVEN the
long poll async THEN not that: the jobs complete.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "anyio_pool.py"
TAGS = ["api", "clients", "executor"]


def test_sync_long_polls_that_hold_every_worker_thread_starve_the_claim(
        tmp_path: Path) -> None:
    with verdict_job("sync", tmp_path, TAGS, timeout=90, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
        pids = dict(job.pids)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["api"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("A server's pool full of calls that never end: 45 calls wait on "
                              f"PID {pids['api']} (python)"), summary
    assert "all 40 worker threads of its handler pool (AnyIO worker thread) run handlers " \
        "blocked inside them at api.<locals>.result (anyio_pool.py:" in summary, summary
    assert "Make the endpoints that wait async" in summary, summary


def test_async_long_polls_leave_the_claims_their_threads(tmp_path: Path) -> None:
    with verdict_job("async", tmp_path, TAGS, timeout=90, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert "pool full of calls" not in data["verdict"]["summary"], text
    assert data["verdict"]["kind"] in ("progressing", "idle", "paused"), (data["verdict"], text)
