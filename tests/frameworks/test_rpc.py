"""torch.distributed.rpc (TensorPipe over TCP) under torchrun, 3 ranks: a trainer and two
parameter servers whose ``lookup`` fetches the other server's rows with a nested ``rpc_sync``
(tests/targets/frameworks/rpc_jobs.py; pytorch/pytorch#26362, blind round 26's 01).

GIVEN 4 RPC threads per server and 4 lookups in flight on each, every RPC thread of both
servers blocked in its nested call, THEN a deadlock of RPC threads all waiting on nested calls,
at the lookup's line, with what to change. GIVEN 16 RPC threads per server THEN progressing.

GIVEN a batch-update parameter server (``@rpc.functions.async_execution``, pytorch/examples'
"Batch RPC", launched by ``torch.multiprocessing.spawn``; rpc_batch_jobs.py) whose trainers
got 6 and 5 batches, THEN "a call no server runs": trainer1's last ``rpc_sync`` waits for a
future the PS never completes, trainer1 the suspect, the PS (a rank, not "other") waiting on
the trainers' loops behind it (blind round 27's 05). GIVEN even trainers THEN progressing.
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
BATCH_JOBS = TARGETS / "frameworks" / "rpc_batch_jobs.py"


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


def _spawned(mode: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    workdir = tmp_path / mode
    argv = [sys.executable, str(BATCH_JOBS), mode, str(workdir / "ready"), str(workdir),
            str(free_port())]
    return running_target(argv, workdir, tags=["ps", "trainer1", "trainer2"], timeout=120)


def test_a_batch_the_parameter_server_never_completes_is_a_call_no_server_runs(
        tmp_path: Path) -> None:
    with _spawned("uneven", tmp_path) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.pids["trainer1"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("A call no server runs: Thread pt_thread_pool of rank 1 (PID "
                              f"{job.pids['trainer1']}) waits in rpc_sync at run_trainer "
                              "(rpc_batch_jobs.py:"), summary
    assert "@rpc.functions.async_execution" in summary, summary
    assert (f"rank 0 (PID {job.pids['ps']}) waits on the reply to its RPC futures at wait_all"
            in summary), summary
    roles = {p["pid"]: p["role"] for p in data["processes"]}
    assert {roles[job.pids[t]] for t in ("ps", "trainer1", "trainer2")} == {"rank"}, roles


def test_a_batch_parameter_server_with_even_trainers_progresses(tmp_path: Path) -> None:
    """The trainers' loops run as the PS's requests, on their RPC threads, while their main
    threads wait in rpc.shutdown: those threads are judged, and the PS waits on them."""
    with _spawned("even", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def test_a_parameter_server_serving_from_its_shutdown_barrier_progresses(
        tmp_path: Path) -> None:
    """The tutorial's shape: the PS's main thread waits in ``rpc.shutdown()`` while its RPC
    threads apply the trainers' updates; ``mp.spawn``'s parent reads the PS's error pipe (a
    chain from the launcher to the PS read "wait chain", blind round 35's 03): the PS is in
    live traffic with the trainers that progress."""
    with _spawned("pull", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict
