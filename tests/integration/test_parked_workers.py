"""Workers parked on a multiprocessing Condition of a coordinator asleep between phases are
paused, on real processes (tests/targets/parked_jobs.py).

GIVEN a coordinator in one long sleep (no wake-up in the window) whose three children wait
on a shared ``multiprocessing.Condition`` (shared memory: no fd says who notifies it) THEN
the job is paused, not hung: each child waits for its calm parent's next phase. GIVEN the
coordinator polling a drain file every 2.5 s instead (it wakes once at most in the window)
THEN paused too: a sleep longer than the window that checks once is between phases.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump


@pytest.mark.parametrize("mode", ["paused", "drain"])
def test_children_parked_on_a_condition_of_a_sleeping_parent_are_paused(
        tmp_path: Path, mode: str) -> None:
    data, pids = settled_dump(TARGETS / "parked_jobs.py", mode, tmp_path,
                              ["coordinator", "worker"])
    verdict = data["verdict"]
    assert verdict["kind"] == "paused" and verdict["suspects"] == [], verdict
    assert f"PID {pids['coordinator']} is paused" in verdict["summary"], verdict
