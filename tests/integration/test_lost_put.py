"""A multiprocessing Queue's feeder thread drops an item that does not pickle
(tests/targets/lost_put.py; blind round 29's 07 read a deadlock between the parent and a
worker, the parent the suspect).

GIVEN a parent waiting in Queue.get for the result a worker's feeder thread could not send
(its traceback in the job's log), every process idle in a get THEN "A message lost", the
log's exception quoted, the workers that put on the queue the suspects.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support import TARGETS, asleep, dump_json, running_target

JOB = TARGETS / "lost_put.py"


def test_a_result_its_feeder_thread_dropped_is_a_lost_message(tmp_path: Path) -> None:
    tags = ["parent", "worker0", "worker1"]
    with running_target([sys.executable, str(JOB), str(tmp_path / "ready")], tmp_path,
                        tags=tags, timeout=60,
                        ready=lambda t: all(asleep(t.pids[tag]) for tag in tags)) as job:
        verdict = json.loads(dump_json(job.pids["parent"]))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "wait_chain", verdict
    assert sorted(verdict["suspects"]) == sorted((pids["worker0"], pids["worker1"])), verdict
    summary = verdict["summary"]
    assert summary.startswith("A message lost: a multiprocessing Queue's feeder thread could "
                              "not send an item"), summary
    assert "\"TypeError: cannot pickle '_thread.lock' object\"" in summary, summary
    assert f"PID {pids['parent']} (python) waits in Queue.get at main (lost_put.py:" in summary
