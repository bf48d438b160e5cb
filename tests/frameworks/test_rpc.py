"""torch.distributed.rpc (TensorPipe over TCP) under torchrun, 3 ranks: a trainer and two
parameter servers whose ``lookup`` fetches the other server's rows with a nested ``rpc_sync``
(tests/targets/frameworks/rpc_jobs.py; pytorch/pytorch#26362, blind round 26's 01).

GIVEN 4 RPC threads per server and 4 lookups in flight on each, every RPC thread of both
servers blocked in its nested call, THEN a deadlock of RPC threads all waiting on nested calls,
at the lookup's line, with what to change. GIVEN 16 RPC threads per server THEN progressing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target
from targets.hang_shapes import free_port

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "rpc_jobs.py"


def _torchrun(mode: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    workdir = tmp_path / mode
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3",
            "--master-port", str(free_port()), str(JOBS), mode, str(workdir / "ready"),
            str(workdir)]
    return running_target(argv, workdir, tags=["trainer", "ps1", "ps2"], timeout=120)


def test_servers_whose_every_rpc_thread_waits_on_a_nested_rpc_are_a_deadlock(
        tmp_path: Path) -> None:
    with _torchrun("nested", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) <= {job.pids["ps1"], job.pids["ps2"]}, verdict
    assert verdict["suspects"], verdict
    summary = verdict["summary"]
    assert summary.startswith("Deadlock (RPC threads all waiting on nested calls): All 4 RPC "
                              "threads of rank "), summary
    assert "wait inside a nested rpc_sync at lookup (rpc_jobs.py:" in summary, summary
    assert "@rpc.functions.async_execution" in summary, summary


def test_servers_with_threads_to_spare_for_nested_rpcs_progress(tmp_path: Path) -> None:
    with _torchrun("nested_ok", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict
