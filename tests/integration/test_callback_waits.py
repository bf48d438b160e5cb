"""A ProcessPoolExecutor done-callback that waits on its own executor, on a real process
(tests/targets/callback_jobs.py).

GIVEN a render farm whose frame callbacks, run on the executor's management thread, submit a
thumbnail to the same executor and block on its result THEN a deadlock: the management
thread waits for a result only it can deliver; it and the callback are named.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump


def test_a_done_callback_waiting_on_its_own_process_pool_is_a_deadlock(tmp_path: Path) -> None:
    data, pids = settled_dump(TARGETS / "callback_jobs.py", "blocked", tmp_path, ["farm"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert "management thread of its ProcessPoolExecutor" in verdict["summary"], verdict
    assert "Farm.on_frame (callback_jobs.py:" in verdict["summary"], verdict
    assert verdict["suspects"] == [pids["farm"]], verdict
