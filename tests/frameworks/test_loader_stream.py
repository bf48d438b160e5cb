"""A real DataLoader fed by a stream between its phases (tests/targets/frameworks/loader_stream.py).

GIVEN a trainer whose persistent DataLoader workers PULL records over ZMQ from a shipper that
pushed one segment and sleeps until its next rotation, the segment trained THEN paused, nobody
blamed: the trainer waits on its workers (its get times out every 5 s to check them), the
workers on the shipper, the shipper on its timer (blind round 28's 08 read "unknown").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target

pytestmark = pytest.mark.frameworks

JOB = TARGETS / "frameworks" / "loader_stream.py"


def test_a_loader_waiting_for_a_stream_between_rotations_is_paused(tmp_path: Path) -> None:
    workdir = tmp_path / "stream"
    argv = [sys.executable, str(JOB), str(workdir / "ready"), str(workdir)]
    with running_target(argv, workdir, tags=["trainer"], timeout=90) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] in ("paused", "idle"), verdict
    assert verdict["suspects"] == [], verdict
