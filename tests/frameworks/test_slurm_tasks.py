"""Ranks placed by Slurm's environment (tests/targets/frameworks/slurm_tasks.py; blind round
35's 07, Lightning#8707).

GIVEN an allocation of 2 tasks whose script ran with ``python``, not ``srun``: one task, rank
0, in ``init_process_group`` THEN a missing rank, 2 expected by ``SLURM_NTASKS`` (it read "all
waiting", a peer that never joined). GIVEN both tasks started THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "slurm_tasks.py"


def test_one_task_of_two_started_without_srun_is_a_missing_rank(tmp_path: Path) -> None:
    with verdict_job("alone", tmp_path, ["rank0"], timeout=90, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "missing_rank", (verdict, text)
    assert verdict["summary"].startswith(
        "Missing rank: expected 2 ranks (SLURM_NTASKS=2: one task per rank, each started by "
        "srun), found rank 0: rank 1 is missing"), verdict["summary"]


def test_both_tasks_started_progress(tmp_path: Path) -> None:
    with verdict_job("srun", tmp_path, ["rank0", "rank1"], timeout=90, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)
