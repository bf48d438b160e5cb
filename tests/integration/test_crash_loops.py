"""Children that die as they start and are started again, on real processes
(tests/targets/restart_jobs.py).

GIVEN a supervisor keeping three replicas up, each dying at once on a KeyError in its config
load (its traceback on the shared stderr), restarted whenever one exits THEN a crash loop:
the children gone during the dump are the suspects, the error and the function that raises
it are named; never "a rank exited" alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support import TARGETS, dump_json, running_target


def test_replicas_restarted_as_they_die_are_a_crash_loop(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    argv = [sys.executable, str(TARGETS / "restart_jobs.py"), "crashing", str(ready),
            str(tmp_path)]
    with running_target(argv, tmp_path, tags=["supervisor"], ready_file=ready,
                        timeout=60) as job:
        data = json.loads(dump_json(job.pids["supervisor"]))
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["summary"].startswith("Crash loop"), verdict["summary"]
    assert "KeyError: 'shard'" in verdict["summary"], verdict
    assert "load_config (restart_jobs.py:" in verdict["summary"], verdict
    assert verdict["suspects"] and job.pids["supervisor"] not in verdict["suspects"], verdict
