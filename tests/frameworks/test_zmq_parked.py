"""A request a zmq service took and holds (tests/targets/frameworks/zmq_parked.py: a trainer's
REQ and a curriculum service's ROUTER over TCP; blind round 38's 05).

GIVEN a trainer that asks for the next batch before it reports the losses the service builds
that batch from THEN a deadlock with the trainer the suspect, saying the service took the
message the trainer sent last and holds it (tcp_info: the trainer spoke last, the service
read all of it and sent nothing since), not that a message was lost (it read "the message
that should have started them was lost or never sent"). GIVEN the trainer that reports first
THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, verdict_job, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_parked.py"
TAGS = ["service", "trainer"]


def test_given_a_request_the_service_parks_for_the_askers_report_then_it_holds_it(
        tmp_path: Path) -> None:
    with verdict_job("ahead", tmp_path, TAGS, jobs=JOBS) as job:
        wait_off_cpu(job.pids["trainer"], 0.3)  # in its receive for the parked batch
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"][0] == pids["trainer"], verdict
    summary = verdict["summary"]
    assert (f"PID {pids['service']} (python) took the message PID "
            f"{pids['trainer']} (python) sent last") in summary, summary
    assert "was lost" not in summary, summary


def test_given_a_trainer_that_reports_before_it_asks_then_progressing(tmp_path: Path) -> None:
    with verdict_job("reported", tmp_path, TAGS, jobs=JOBS) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict
