"""A uvicorn server rolled by its supervisor while a dashboard streams its server-sent events
(tests/targets/frameworks/uvicorn_drain.py; blind round 32's 07).

GIVEN the server's graceful shutdown waiting, with no deadline, for the endless ``/events``
response (uvicorn#451) THEN "shutdown never finished": the server the suspect, the dashboard
holding its connection and the supervisor waiting for it to exit named (it read "unknown").
GIVEN a shutdown deadline THEN the replacement serves: not that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "uvicorn_drain.py"


def test_a_server_whose_shutdown_waits_for_an_endless_stream_is_named(tmp_path: Path) -> None:
    with verdict_job("drain", tmp_path, ["server", "dashboard", "supervisor"], timeout=60,
                     jobs=JOBS) as job:
        log = tmp_path / "job-drain" / "server.log"
        poll(lambda: "Waiting for connections to close" in log.read_text(),
             "uvicorn waiting for the connections to close", 30)
        raw = dump_json(job.pids["supervisor"])
        pids = dict(job.pids)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["server"]], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"Shutdown never finished: PID {pids['server']} (python) logged "
                              "\"Waiting for connections to close.\""), summary
    assert f"its 1 open connection, to PID {pids['dashboard']} (python), which keeps it " \
        "open" in summary, summary
    assert f"(PID {pids['supervisor']}) waits for it to exit" in summary, summary


def test_a_server_rolled_with_a_shutdown_deadline_is_not_that(tmp_path: Path) -> None:
    with verdict_job("deadline", tmp_path, ["server", "dashboard", "supervisor"], timeout=60,
                     jobs=JOBS) as job:
        raw = dump_json(job.pids["supervisor"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert not data["verdict"]["summary"].startswith("Shutdown never finished"), text
    assert data["verdict"]["kind"] in ("progressing", "idle"), (data["verdict"], text)
