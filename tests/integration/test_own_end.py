"""A reader that holds the other end itself, on a real job (tests/targets/own_end_jobs.py).

GIVEN a merger that reads shard 0's socketpair until EOF while it still holds that pair's child
end (never closed after fork), its reader gone and the other readers blocked sending to it,
THEN the verdict is a deadlock that names the merger and says it holds the other end itself.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump

JOBS = TARGETS / "own_end_jobs.py"


def test_a_merger_reading_until_eof_while_it_holds_the_other_end_is_named(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "merge", tmp_path, ["merger", "reader1", "reader2"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"][0] == pids["merger"], verdict
    assert "holds that other end itself" in verdict["summary"], verdict["summary"]
