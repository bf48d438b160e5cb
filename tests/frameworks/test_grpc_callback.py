"""gRPC done-callbacks that chain a second call (tests/targets/frameworks/grpc_callback.py;
blind round 35's 02, grpc#21716).

GIVEN a done-callback that waits in the second future's ``.result()`` on the channel's thread
THEN a deadlock of that thread with itself, the client the suspect (it read "a lost wake-up",
with advice about notify order). GIVEN the callback chaining it with ``add_done_callback`` THEN
progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "grpc_callback.py"
TAGS = ["server", "client"]


def test_a_done_callback_blocking_on_the_channel_thread_waits_for_itself(
        tmp_path: Path) -> None:
    with verdict_job("blocking", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
        client = job.pids["client"]
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert verdict["suspects"] == [client], verdict
    summary = verdict["summary"]
    assert summary.startswith("Deadlock (a callback waits for the thread that runs it): "
                              "Thread "), summary
    assert "gRPC's channel thread" in summary and "client.<locals>.on_lookup " \
        "(grpc_callback.py:" in summary, summary


def test_a_done_callback_that_chains_the_next_call_progresses(tmp_path: Path) -> None:
    with verdict_job("chained", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)
