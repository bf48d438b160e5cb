"""Blind round 27's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 27).

GIVEN a tensor-parallel server idle between requests (rank 0's uvicorn loop waiting for
clients, its AnyIO worker thread waiting for its next task; rank 1 in broadcast_object_list
for the next request: vllm#5084's worker loop) THEN idle, nobody blamed (it read "straggler:
rank 0 waits on a lock at WorkerThread.run"). GIVEN a Ray Train worker waiting for a plain
task no CPU is left for THEN tasks nobody runs, that worker the suspect.
"""

from __future__ import annotations

import json
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import from_dict, load

BLIND = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_tensor_parallel_server_between_requests_then_idle() -> None:
    snap = analyze(load(BLIND / "tp_server_idle.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.IDLE, verdict
    assert verdict.suspects == (), verdict
    rank0 = next(p for p in snap.ranks if p.rank is not None and p.rank.global_rank == 0)
    assert rank0.working_thread is not None and rank0.working_thread.name == "MainThread"
    anyio = next(t for t in rank0.threads if t.name == "AnyIO worker thread")
    assert anyio.helper, anyio


def test_given_a_ray_train_worker_waiting_for_a_task_no_cpu_is_left_for_then_tasks_nobody_runs(
        ) -> None:
    """Rank 0's training thread ``ray.get``s a plain 1-CPU task while the two Train workers
    hold both CPUs (ray#32856): every worker hosts an actor, so none runs the task; Ray keeps
    it pending. It read "straggler: rank 0 waits on a lock at Worker.get_objects"."""
    snap = analyze(load(BLIND / "ray_train_task_starved.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    rank0 = next(p.pid for p in snap.ranks if p.rank is not None and p.rank.global_rank == 0)
    assert verdict.suspects == (rank0,), verdict
    assert verdict.summary.startswith("Tasks nobody runs: Thread TrainingThread"), verdict
    assert "every worker hosts an actor and runs its methods only (rank 0" in verdict.summary
    assert "actors that hold every CPU of the cluster" in verdict.summary, verdict.summary


def test_given_a_rank_that_raised_but_joins_a_non_daemon_thread_then_its_exception_is_said(
        ) -> None:
    """DeepSpeed rank 1 raised IndexError (its ``[rank1]:`` lines in the job's log) but its
    non-daemon monitor thread keeps it alive at exit: the straggler, with its exception."""
    snap = analyze(load(BLIND / "ds_rank_raised_nondaemon.dump.json"))
    verdict = snap.verdict
    rank1 = next(p.pid for p in snap.ranks if p.rank is not None and p.rank.global_rank == 1)
    assert verdict is not None and verdict.suspects == (rank1,), verdict
    assert ("its main code ended with an exception (IndexError: Target 12 is out of bounds) "
            "that the launcher never sees") in verdict.summary, verdict.summary


def test_given_ranks_whose_pids_run_against_their_numbers_then_the_workers_are_named_in_rank_order(
        ) -> None:
    """The same job with rank 0's PID above rank 1's (as CI's run had it): the workers that
    host actors are named rank 0 first, not in PID order."""
    data = json.loads((BLIND / "ray_train_task_starved.dump.json").read_text())
    ranks = [p for p in data["processes"] if p.get("rank")]
    ranks[0]["rank"], ranks[1]["rank"] = ranks[1]["rank"], ranks[0]["rank"]
    low, high = sorted(p["pid"] for p in ranks)
    summary = analyze(from_dict(data)).verdict.summary
    assert f"runs its methods only (rank 0 (PID {high}), rank 1 (PID {low})" in summary, summary
