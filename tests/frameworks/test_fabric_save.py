"""Lightning Fabric's save called on rank 0 only (tests/targets/frameworks/fabric_jobs.py).

GIVEN ``if fabric.is_global_zero: fabric.save(...)`` then ``fabric.barrier()`` on every rank
THEN the collectives are mismatched, rank 0 is the odd one, and the verdict says why: Fabric.save
ends in a barrier of its own, which paired with rank 1's barrier, so the ranks are one collective
apart (blind round 44's 07 named the ranks, not the call). GIVEN the save on every rank THEN
training goes on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "fabric_jobs.py"


def _verdict(mode: str, tmp_path: Path, settle: bool) -> tuple[dict[str, object], int]:
    workdir = tmp_path / mode
    argv = [sys.executable, str(JOBS), mode, str(workdir / "ready"), str(workdir)]
    with running_target(argv, workdir, tags=["rank0", "rank1"], timeout=120) as job:
        if settle:
            for pid in job.pids.values():
                wait_off_cpu(pid, 1.0)  # each in its collective
        return json.loads(dump_json(job.launcher))["verdict"], job.pids["rank0"]


def test_a_save_on_rank_0_only_leaves_the_ranks_one_collective_apart(tmp_path: Path) -> None:
    verdict, rank0 = _verdict("save_rank0", tmp_path, settle=True)
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [rank0], verdict
    summary = str(verdict["summary"])
    assert "Rank 0 called fabric.save (fabric_jobs.py:" in summary, summary
    assert "under `if step % EVERY == 0 and mode == 'save_rank0' and " \
        "fabric.is_global_zero:`" in summary, summary
    assert "Fabric.save ends in a barrier of its own" in summary, summary
    assert "one collective apart" in summary, summary
    assert "Call fabric.save on every rank: it writes the file on rank 0 only" in summary


def test_a_save_on_every_rank_trains_on(tmp_path: Path) -> None:
    verdict, _ = _verdict("save_all", tmp_path, settle=False)
    assert verdict["kind"] == "progressing", verdict
