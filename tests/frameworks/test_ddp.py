"""DDP over gloo on CPU, 2 ranks under torchrun (tests/targets/frameworks/ddp_jobs.py).

GIVEN DDP training that progresses, THEN the verdict is progressing. GIVEN rank 1 blocked
before its backward while rank 0 is inside backward (DDP's reducer waits for the gradient
all_reduce, which gloo runs on threads py-spy cannot see), THEN rank 0 waits in all_reduce at
its own ``loss.backward()`` line, and rank 1 is the suspect.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target
from targets.hang_shapes import free_port

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "ddp_jobs.py"


def _torchrun(mode: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    workdir = tmp_path / mode
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--master-port", str(free_port()), str(JOBS), mode, str(workdir / "ready"),
            str(workdir)]
    return running_target(argv, workdir, tags=["rank0", "rank1"], timeout=60)


def test_ddp_training_that_progresses_is_progressing(tmp_path: Path) -> None:
    with _torchrun("ddp_progress", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def test_a_rank_inside_backward_waits_in_all_reduce_for_the_rank_that_never_got_there(
        tmp_path: Path) -> None:
    with _torchrun("ddp_stalled_rank", tmp_path) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["suspects"][0] == job.pids["rank1"], verdict
    assert "Rank 0" in verdict["summary"], verdict
    assert "waits in all_reduce at ddp (ddp_jobs.py:" in verdict["summary"], verdict
    rank0 = next(p for p in data["processes"] if p["pid"] == job.pids["rank0"])
    working = next(t for t in rank0["threads"] if t["tid"] == rank0["working_tid"])
    assert (working["category"], working["op"]) == ("collective", "all_reduce"), working
    assert working["site"].startswith("ddp (ddp_jobs.py:"), working
