"""A wait that loops through an inherited pipe end is no deadlock while the end's real holder
works, on real processes (tests/targets/busy_holder_jobs.py).

GIVEN a coordinator waiting on its duplex Pipe to a builder that computes, where two forked
workers inherited the builder's end and wait on a queue the coordinator fills after THEN the
job is slow (progressing), never a deadlock: the fd graph has a cycle through a worker, but
the builder holds that end too and is busy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support import TARGETS, asleep, dump_json, running_target

TAGS = ["coordinator", "builder", "shard"]


def test_a_cycle_through_an_inherited_end_whose_holder_computes_is_slow(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    argv = [sys.executable, str(TARGETS / "busy_holder_jobs.py"), "slow", str(ready),
            str(tmp_path)]
    with running_target(argv, tmp_path, tags=TAGS, ready_file=ready, timeout=60,
                        ready=lambda t: asleep(t.pids["coordinator"])
                        and asleep(t.pids["shard"])) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert "Deadlock" not in verdict["summary"], verdict
    assert f"PID {job.pids['builder']}" in verdict["summary"], verdict
