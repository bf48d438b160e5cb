"""A launcher's helper thread never stands for the job, on real torchrun jobs
(tests/targets/keepalive_jobs.py).

GIVEN torchrun's agent, whose ``RendezvousKeepAliveTimer`` thread waits in ``Event.wait``
between beats, and rank 1 waiting in ``Queue.get`` for a loader thread that died (its traceback
in the job's shared output) while rank 0 waits in all_reduce for it THEN rank 1 is the suspect,
never the agent. GIVEN both ranks fed by a live loader (the healthy twin) THEN progressing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_dump

JOBS = TARGETS / "keepalive_jobs.py"


def test_a_rank_whose_loader_died_is_the_suspect_not_torchruns_keep_alive_timer(
        tmp_path: Path) -> None:
    data, pids = job_dump("died", tmp_path, ["rank0", "rank1"], JOBS)
    verdict = data["verdict"]
    assert (verdict["kind"], verdict["suspects"]) == ("wait_chain", [pids["rank1"]]), verdict
    summary = verdict["summary"]
    assert f"Rank 1 (PID {pids['rank1']}) waits in Queue.get at rank_main" in summary, summary
    assert "thread loader died" in summary and "KeepAlive" not in summary, summary


@pytest.mark.extended
def test_ranks_fed_by_a_live_loader_under_torchrun_are_progressing(tmp_path: Path) -> None:
    data, _ = job_dump("steady", tmp_path, ["rank0", "rank1"], JOBS)
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
