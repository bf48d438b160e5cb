"""torchrun under srun: real dumps of one node each of the Slurm namespace cluster's job,
captured before the fix, where the agent (SLURM_PROCID=N, no LOCAL_RANK) was read as rank N
next to its two LOCAL_RANK workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangscope.analyze.evidence.roles import refine_roles
from hangscope.model import Role
from hangscope.model.serialize import load

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "multinode"


@pytest.mark.parametrize("node", ["node01", "node02", "node03"])
def test_the_agent_srun_started_is_the_launcher_of_its_ranks(node: str) -> None:
    snap = load(FIXTURES / f"slurm3x2-{node}.json")
    agent = next(p for p in snap.processes if "torch.distributed.run" in (p.title or ""))
    assert agent.role is Role.RANK and agent.rank.local_rank is None  # as captured

    procs = {p.pid: p for p in refine_roles(snap.processes)}

    assert procs[agent.pid].role is Role.LAUNCHER and procs[agent.pid].rank is None
    workers = [p for p in procs.values() if p.ppid == agent.pid]
    assert len(workers) == 2
    assert all(p.role is Role.RANK and p.rank.local_rank is not None for p in workers)
