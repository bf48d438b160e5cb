"""A spawned child that runs its parent's script again, waiting there on what its parent
holds (tests/targets/spawn_rerun.py; nicegui#6166, blind round 41's 06).

GIVEN a parent that holds a ``filelock`` lock taken at its script's top level while it writes
its spawned child's start-up data, and the child, re-running the script as ``__mp_main__``,
polling that lock THEN a deadlock whose suspect is the child, and the advice is the main
guard: the polled lock leads to its holder (/proc/locks, the file from ``--locals``), whose
write waits on the child.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support import TARGETS, dump_json, running_target


def test_a_spawned_child_rerunning_the_script_into_its_parents_lock_is_the_suspect(
        tmp_path: Path) -> None:
    workdir = tmp_path / "spawn_rerun"
    argv = [sys.executable, str(TARGETS / "spawn_rerun.py"), str(workdir / "ready"),
            str(workdir)]
    with running_target(argv, workdir, tags=["parent", "child"], timeout=60) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        child = job.pids["child"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [child], verdict
    summary = str(verdict["summary"])
    assert summary.startswith(f"Deadlock: PID {child} (python) waits for the file lock on "
                              f"{workdir / 'cache.lock'} at <module> (spawn_rerun.py:"), summary
    assert "is still running its parent's script again" in summary, summary
