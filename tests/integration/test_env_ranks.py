"""Ranks that set their own rank in ``os.environ`` after they started, on real gloo jobs
(tests/targets/env_rank_jobs.py).

GIVEN 3 forked workers that set RANK/LOCAL_RANK/WORLD_SIZE in ``os.environ`` themselves, their
rank the reverse of their start order, and rank 1 in broadcast while ranks 0 and 2 wait in
all_reduce THEN each is the rank its live environment names (not its start order), and rank 1
is the odd one out. GIVEN the same workers all_reducing in a loop (the healthy twin) THEN the
same ranks, progressing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_dump

JOBS = TARGETS / "env_rank_jobs.py"
TAGS = ["launcher", "rank0", "rank1", "rank2"]


def _dumped(mode: str, tmp_path: Path) -> tuple[dict, dict[str, int]]:
    return job_dump(mode, tmp_path, TAGS, JOBS)


def _ranks(data: dict) -> dict[int, tuple[int, str]]:
    return {p["rank"]["global_rank"]: (p["pid"], p["rank"]["source"]) for p in data["processes"]
            if p["role"] == "rank" and p.get("rank")}


def test_workers_that_set_their_rank_in_os_environ_are_that_rank(tmp_path: Path) -> None:
    data, pids = _dumped("mismatch", tmp_path)
    assert _ranks(data) == {r: (pids[f"rank{r}"], "env") for r in range(3)}
    verdict = data["verdict"]
    said = (verdict["kind"], verdict["suspects"], "rank 1 waits in broadcast" in verdict["summary"])
    assert said == ("mismatched_collectives", [pids["rank1"]], True), verdict


@pytest.mark.extended
def test_workers_that_set_their_rank_and_all_reduce_in_a_loop_are_progressing(
        tmp_path: Path) -> None:
    data, pids = _dumped("steady", tmp_path)
    assert _ranks(data) == {r: (pids[f"rank{r}"], "env") for r in range(3)}
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
