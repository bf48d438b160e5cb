"""Spin-waits burn a core yet wait, on real processes (tests/targets/spin_jobs.py).

GIVEN a shared-memory broadcast ring whose publisher spins (``os.sched_yield``) for a read flag
from a reader that was never started (vllm#5801: the ring sized for one reader too many), while
the readers poll for the next message and the server waits on a pipe for the publisher, THEN
the verdict is hung, names the publisher as the suspect and says it spin-waits, never
"progressing" for its moving line or its CPU. GIVEN the same ring sized right, where every
process spins for each message and handles it, THEN the job is progressing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target

JOBS = TARGETS / "spin_jobs.py"
TAGS = ["server", "reader0", "reader1", "publisher"]


def _dump(mode: str, tmp_path: Path) -> tuple[dict, dict[str, int]]:
    ready = tmp_path / "ready"
    argv = [sys.executable, str(JOBS), mode, str(ready), str(tmp_path)]
    with running_target(argv, tmp_path, tags=TAGS, ready_file=ready, timeout=60) as job:
        return json.loads(dump_json(job.launcher)), dict(job.pids)


@pytest.mark.quiet  # the yield must be caught in a stack sample: a starved spinner is not
def test_a_publisher_spinning_for_a_reader_never_started_is_the_suspect(tmp_path: Path) -> None:
    data, pids = _dump("ring_short", tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] not in ("progressing", "idle", "paused"), verdict
    assert verdict["suspects"] == [pids["publisher"]], verdict
    assert f"PID {pids['publisher']} (ring::publisher) spin-waits on CPU" in verdict["summary"]
    publisher = next(p for p in data["processes"] if p["pid"] == pids["publisher"])
    assert publisher["threads"][0]["category"] == "spin", publisher["threads"][0]
    decided = {r["pid"]: r for r in data["progress"]["ranks"]}
    assert decided[pids["publisher"]]["decision"] == "stuck", decided[pids["publisher"]]
    assert "spin-waiting" in decided[pids["publisher"]]["reason"]


@pytest.mark.extended
@pytest.mark.quiet  # how many messages flow in the window depends on the CPU it gets
def test_a_ring_whose_every_process_spins_for_each_message_and_handles_it_progresses(
        tmp_path: Path) -> None:
    data, pids = _dump("ring_busy", tmp_path)
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
    decided = {r["pid"]: r["decision"] for r in data["progress"]["ranks"]}
    assert decided[pids["publisher"]] == "progressing", decided
