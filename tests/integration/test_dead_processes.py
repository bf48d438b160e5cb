"""A process of the job died and the others poll for it, on real processes
(tests/targets/zombie_wait_jobs.py).

Shaped after the "kill(pid, 0) says a zombie is alive" reports (blind round 11's weight
server) and a multiprocessing target that raised while its readers poll: the waiters' log
names the dead process, which is a zombie its parent never reaps.

GIVEN an indexer polling ``kill(N, 0)`` for a server that exited and that the launcher never
reaps (it waits for the indexer) THEN a process died: the server suspected, the log line
quoted, the zombie's kill(pid, 0) said, the fix. GIVEN the same indexer waiting for a server
that lives THEN no process is said to have died.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "zombie_wait_jobs.py"


def test_an_indexer_polling_for_a_zombie_server_names_the_dead_server(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "zombie", tmp_path, ["launcher", "indexer"])
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A process died"), summary
    assert "waiting for cache server PID" in summary and "kill(pid, 0)" in summary, summary
    zombie = next(p["pid"] for p in data["processes"] if p["state"] == "Z")
    assert verdict["suspects"] == [zombie], verdict
    assert f"PID {pids['indexer']} (indexer)" in summary, summary


@pytest.mark.extended
def test_an_indexer_waiting_for_a_live_server_names_no_dead_process(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "alive", tmp_path, ["launcher", "indexer"])
    assert "A process died" not in data["verdict"]["summary"], data["verdict"]
