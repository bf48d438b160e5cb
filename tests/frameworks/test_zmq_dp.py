"""A vLLM-shaped data-parallel engine (tests/targets/frameworks/zmq_dp.py: a front end and two
engine processes over pyzmq, the engines in a gloo group of their own, no RANK; blind round
39's 01, vllm-project/vllm#39366).

GIVEN a wave that woke engine 1 only THEN engine 1 waits in its step's all_reduce for engine
0, its peer in the gloo group, which waits in its input poll: engine 0 the suspect (it read a
deadlock of zmq receives between the front end and an engine, each "waiting for a message
the other never sends": how the idle loops around the collective wait). GIVEN both woken
THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, verdict_job, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_dp.py"


def test_given_a_wave_one_engine_missed_then_its_peer_waits_in_the_collective_for_it(
        tmp_path: Path) -> None:
    with verdict_job("wave_gap", tmp_path, ["engine0", "engine1", "front"], jobs=JOBS) as job:
        for tag in ("engine0", "engine1", "front"):
            wait_off_cpu(job.pids[tag], 0.5)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"][0] == pids["engine0"], verdict
    summary = verdict["summary"]
    assert f"engine core (PID {pids['engine1']}) waits in all_reduce at engine (zmq_dp.py:" \
        in summary, summary
    assert "it has not got to the collective, which cannot return without it" in summary, \
        summary
    assert "never sends" not in summary and "was lost" not in summary, summary


def test_given_both_engines_woken_then_progressing(tmp_path: Path) -> None:
    with verdict_job("wave_all", tmp_path, ["engine0", "engine1", "front"], jobs=JOBS) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict
