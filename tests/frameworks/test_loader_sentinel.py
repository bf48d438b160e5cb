"""A real DataLoader whose IterableDataset workers share one queue with one end marker
(tests/targets/frameworks/loader_sentinel.py).

GIVEN two workers reading a decoder's queue that got one end-of-stream marker, the worker
that took it gone, THEN a deadlock whose suspect is the worker still waiting in its dataset's
``queue.get`` (blind round 37's 07 named the trainer, which waits through the DataLoader for
that worker's batch). GIVEN a decoder putting records slowly THEN progressing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target

pytestmark = pytest.mark.frameworks

JOB = TARGETS / "frameworks" / "loader_sentinel.py"


def _verdict(mode: str, tmp_path: Path) -> tuple[dict[str, object], int, list[int]]:
    workdir = tmp_path / mode
    argv = [sys.executable, str(JOB), mode, str(workdir / "ready"), str(workdir)]
    with running_target(argv, workdir, tags=["trainer"], timeout=90) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        workers = [int(line.split()[0]) for line in job.ready_file.read_text().splitlines()
                   if line.endswith(" worker")]
    return verdict, job.launcher, workers


def test_a_worker_left_waiting_on_a_queue_whose_one_end_marker_its_sibling_took_is_the_suspect(
        tmp_path: Path) -> None:
    verdict, trainer, workers = _verdict("one_sentinel", tmp_path)
    assert verdict["kind"] == "deadlock", verdict
    (suspect,) = verdict["suspects"]  # type: ignore[misc]
    assert suspect in workers and suspect != trainer, (verdict, workers)
    assert str(verdict["summary"]).startswith(
        f"Deadlock: Thread MainThread of the data worker (PID {suspect}) is blocked reading "
        "pipe "), verdict


def test_workers_reading_a_slow_decoder_progress(tmp_path: Path) -> None:
    verdict, _, _ = _verdict("slow_decoder", tmp_path)
    assert verdict["kind"] == "progressing", verdict
