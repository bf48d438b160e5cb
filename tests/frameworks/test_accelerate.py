"""Accelerate 1.16 over gloo on CPU, 2 ranks under ``accelerate launch``
(tests/targets/frameworks/ddp_jobs.py, the ``accel_*`` modes).

GIVEN Accelerate training that progresses, THEN the verdict is progressing. GIVEN rank 1 in an
evaluation-only ``gather_for_metrics`` (an all_gather) while rank 0 is inside
``accelerator.backward``'s all_reduce, THEN the verdict is mismatched collectives and the
suspect is rank 1: the gradient all_reduce is the step every rank runs.
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
ACCELERATE = Path(sys.executable).parent / "accelerate"


def _accelerate(mode: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    workdir = tmp_path / mode
    # --multi_gpu: accelerate's torchrun launcher (its --cpu multi-process path needs MPI);
    # the script's Accelerator(cpu=True) runs gloo on CPU.
    argv = [str(ACCELERATE), "launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(free_port()), str(JOBS), mode, str(workdir / "ready"),
            str(workdir)]
    return running_target(argv, workdir, tags=["rank0", "rank1"], timeout=60)


def test_accelerate_training_that_progresses_is_progressing(tmp_path: Path) -> None:
    with _accelerate("accel_progress", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def test_an_evaluation_gather_against_backwards_all_reduce_is_a_mismatch_of_the_odd_rank(
        tmp_path: Path) -> None:
    with _accelerate("accel_gather_mismatch", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [job.pids["rank1"]], verdict
    summary = verdict["summary"]
    assert "rank 0 waits in all_reduce at accel (ddp_jobs.py:" in summary, summary
    assert "rank 1 waits in all_gather at accel (ddp_jobs.py:" in summary, summary
    assert "The odd one out is rank 1" in summary, summary


def test_a_pad_under_a_test_of_a_rank_own_data_is_the_odd_collective(tmp_path: Path) -> None:
    """Rank 1 pads its short answers with ``pad_across_processes`` under ``if preds.shape[1] <
    MAX_NEW`` inside its loop; rank 0's are never short, so it finished the loop and waits in
    ``wait_for_everyone`` (accelerate#1110, blind round 28's 04: it read rank 0 the odd one,
    "ran fewer steps")."""
    with _accelerate("accel_pad_branch", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [job.pids["rank1"]], verdict
    summary = verdict["summary"]
    assert "Rank 1 waits under `if preds.shape[1] < MAX_NEW` (ddp_jobs.py:" in summary, summary
    assert "The odd one out is rank 1" in summary, summary
