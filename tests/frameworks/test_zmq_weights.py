"""An RL trainer updating an SGLang-shaped engine's weights over a gloo group of their own
(tests/targets/frameworks/zmq_weights.py; blind round 40's 01).

GIVEN a trainer that awaits the engine's reply to its weight-update request before it
broadcasts the weights THEN the scheduler (a rank by its title) waits in the broadcast for the
trainer, its gloo peer and no rank, which waits at its request: the trainer the suspect (it
read "All waiting: rank 0 waits in broadcast", no suspect). GIVEN the broadcast sent while
the reply is awaited THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, verdict_job, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_weights.py"


def test_given_the_reply_awaited_before_the_broadcast_then_the_trainer_is_the_suspect(
        tmp_path: Path) -> None:
    with verdict_job("request_first", tmp_path, ["scheduler", "trainer"], jobs=JOBS) as job:
        for tag in ("scheduler", "trainer"):
            wait_off_cpu(job.pids[tag], 0.5)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"][0] == pids["trainer"], verdict
    summary = verdict["summary"]
    assert f"(PID {pids['scheduler']}) waits in broadcast at scheduler (zmq_weights.py:" in \
        summary, summary
    assert "it has not got to the collective" in summary, summary


def test_given_the_broadcast_sent_while_the_reply_is_awaited_then_progressing(
        tmp_path: Path) -> None:
    with verdict_job("broadcast_too", tmp_path, ["scheduler", "trainer"], jobs=JOBS) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict
