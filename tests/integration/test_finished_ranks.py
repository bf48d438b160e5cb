"""Ranks that finished are not missing; the rank that cannot exit is the suspect, on real jobs
(tests/targets/finish_jobs.py).

GIVEN 3 ranks where ranks 0-1 returned from main and exited with code 0 (unreaped) while rank 2's
``threading._shutdown`` joins its non-daemon ``uploader`` thread, which waits in ``Queue.get``
for an item nobody puts THEN no rank is missing: rank 2 cannot exit, the suspect, with the
thread it joins and where that thread waits. GIVEN ranks 0-1 reaped by a launcher that polls
them, and rank 2 held at exit by multiprocessing joining its non-daemon child, which waits on an
Event nobody sets THEN the same story, the child named. GIVEN rank 2's uploader still working
through its backlog (the healthy twin) THEN progressing, nothing missing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest
from support import FAST_WINDOW, TARGETS, Target, asleep, dump_json, running_target

JOBS = TARGETS / "finish_jobs.py"
TAGS = ["launcher", "rank0", "rank1", "rank2"]


def _ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _dumped(mode: str, tmp_path: Path, settled: bool) -> tuple[dict, dict[str, int]]:
    """Run a finish_jobs.py job until ranks 0-1 ended and rank 2 is where it stays; dump it."""
    def ready(job: Target) -> bool:
        done = all(_ended(job.pids[f"rank{r}"]) for r in (0, 1))
        rank2 = job.pids["rank2"]
        kids = psutil.Process(rank2).children()
        return done and (not settled or (asleep(rank2) and all(asleep(k.pid) for k in kids)))

    workdir = tmp_path / f"job-{mode}"
    with running_target([sys.executable, str(JOBS), mode, str(workdir / "ready"),
                         str(workdir)], workdir, tags=TAGS, ready=ready, timeout=60) as job:
        data = json.loads(dump_json(job.launcher, *FAST_WINDOW))
        return data, dict(job.pids)


def _cannot_exit(data: dict, pids: dict[str, int]) -> str:
    """The verdict's summary, once it says rank 2 cannot exit and nobody is missing."""
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["rank2"]], verdict
    assert "missing" not in verdict["summary"].lower(), verdict
    return verdict["summary"]


def test_ranks_that_exited_with_code_0_are_finished_and_the_rank_joining_its_thread_is_the_suspect(
        tmp_path: Path) -> None:
    data, pids = _dumped("zombie", tmp_path, settled=True)
    summary = _cannot_exit(data, pids)
    assert summary.startswith(f"Cannot exit: rank 2 (PID {pids['rank2']}) returned from its "
                              "main code, but Python joins the non-daemon thread uploader, "
                              "which waits in Queue.get at upload_loop (finish_jobs.py:"), summary
    assert f"PIDs {pids['rank0']}, {pids['rank1']} exited with code 0" in summary, summary
    ids = {f["id"] for f in data["findings"]}
    assert "ranks.finished" in ids and "ranks.missing" not in ids, data["findings"]


@pytest.mark.extended
def test_reaped_ranks_of_a_job_whose_last_rank_joins_its_child_at_exit_are_not_missing(
        tmp_path: Path) -> None:
    summary = _cannot_exit(*_dumped("reaped", tmp_path, settled=True))
    assert "multiprocessing joins its non-daemon child process PID" in summary, summary
    assert "waits in Event.wait at spool_forever (finish_jobs.py:" in summary, summary
    assert "ranks 0-1 exited and were reaped" in summary, summary


@pytest.mark.extended
def test_a_rank_whose_thread_drains_its_backlog_at_exit_is_progressing_not_missing_its_peers(
        tmp_path: Path) -> None:
    data, _ = _dumped("draining", tmp_path, settled=False)
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert "missing" not in verdict["summary"].lower(), verdict
