"""The expected world against the ranks found, on real dumps.

tests/fixtures/gpu/validation/nccl_init.dump.json and pynccl.dump.json are H200 dumps of
2-rank NCCL jobs whose rank 1 never started (docs/gpu.md); the demo snapshots are full jobs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangscope.analyze.evidence.world import describe_missing, missing_ranks
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize("case", ["nccl_init", "pynccl"])
def test_given_h200_job_whose_rank_1_never_started_then_rank_1_missing(case: str) -> None:
    snap = load(FIXTURES / "gpu" / "validation" / f"{case}.dump.json")
    missing = missing_ranks(snap.processes, snap.job)
    assert missing is not None
    assert (missing.expected, missing.found, missing.missing) == (2, ("0",), ("1",))
    assert describe_missing(missing) == (
        "expected 2 ranks (WORLD_SIZE=2), found rank 0: rank 1 is missing (no process is left of "
        "it: it exited and was reaped, or never started)")


@pytest.mark.parametrize("case", ["mismatch", "straggler", "sglang", "tie"])
def test_given_full_job_then_nothing_missing(case: str) -> None:
    snap = load(FIXTURES / "snapshots" / f"{case}.json")
    assert missing_ranks(snap.processes, snap.job) is None
