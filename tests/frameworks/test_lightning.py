"""Lightning 2.6 with its own launcher (``Trainer(accelerator="cpu", devices=2,
strategy="ddp")`` run as ``python script.py``; tests/targets/frameworks/lightning_jobs.py).

The script's process is rank 0 and starts rank 1 as its child. GIVEN training that progresses,
THEN the verdict is progressing and the script's process is rank 0, not a launcher. GIVEN rank
0 blocked in its training step while rank 1 waits in backward's all_reduce, THEN rank 0 (the
script's own process) is the suspect and no rank is missing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "lightning_jobs.py"


def _lightning(mode: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    workdir = tmp_path / mode
    argv = [sys.executable, str(JOBS), mode, str(workdir / "ready"), str(workdir)]
    return running_target(argv, workdir, tags=["rank0", "rank1"], timeout=90)


def _settled_mismatch(mode: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run ``mode``, wait until each rank sits in its collective, dump: (the job, its
    verdict), a mismatch of collectives."""
    with _lightning(mode, tmp_path) as job:
        for pid in job.pids.values():
            wait_off_cpu(pid, 1.0)  # each in its collective
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    return job, verdict


def _ranks(data: dict) -> dict[int, int | None]:  # type: ignore[type-arg]
    return {p["pid"]: (p["rank"] or {}).get("global_rank") for p in data["processes"]
            if p["role"] == "rank"}


def test_lightning_training_that_progresses_is_progressing_with_the_script_as_rank_0(
        tmp_path: Path) -> None:
    with _lightning("progress", tmp_path) as job:
        data = json.loads(dump_json(job.launcher))
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
    assert job.pids["rank0"] == job.launcher
    assert _ranks(data) == {job.launcher: 0, job.pids["rank1"]: 1}, data["processes"]


def test_a_hang_in_the_scripts_own_process_is_rank_0s(tmp_path: Path) -> None:
    with _lightning("rank0_stalls", tmp_path) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] != "missing_rank", verdict
    assert verdict["suspects"][0] == job.launcher, verdict
    assert "Rank 1" in verdict["summary"] and "waits in all_reduce at main " \
        "(lightning_jobs.py:" in verdict["summary"], verdict
    assert "rank 0" in verdict["summary"], verdict
    assert _ranks(data) == {job.launcher: 0, job.pids["rank1"]: 1}, data["processes"]


def test_a_checkpoint_saved_on_global_zero_only_is_rank_0s_barrier_alone(tmp_path: Path) -> None:
    """GIVEN rank 0 in ``save_checkpoint``'s barrier under ``if trainer.is_global_zero:`` and
    rank 1 in the next epoch's first collective (two ranks: no majority) THEN the tie is
    broken by the source: rank 0 called it under a test of its rank, so it is the odd one."""
    job, verdict = _settled_mismatch("ckpt_rank0", tmp_path)
    assert verdict["suspects"] == [job.launcher], verdict
    assert "under `if trainer.is_global_zero:`" in verdict["summary"], verdict


def test_a_checkpoint_saved_in_a_rank_zero_only_method_is_rank_0s_barrier_alone(
        tmp_path: Path) -> None:
    """GIVEN the same checkpoint from a callback method under ``@rank_zero_only`` THEN the
    decorator breaks the tie as the ``if`` did (blind round 19's 02: a collective property
    read in such a method; both ranks were suspects)."""
    job, verdict = _settled_mismatch("ckpt_decorated", tmp_path)
    assert verdict["suspects"] == [job.launcher], verdict
    assert "inside a function decorated `@rank_zero_only` (lightning_jobs.py:" \
        in verdict["summary"], verdict


def test_a_metric_monitored_on_rank_0_only_leaves_the_ranks_one_collective_apart(
        tmp_path: Path) -> None:
    """GIVEN a validation metric logged on rank 0 only that EarlyStopping monitors (blind round
    39's 04, Lightning#19045) THEN the mismatch says both ranks are in ModelCheckpoint's epoch
    end, rank 1 further along: rank 0 made one collective more, rank 0 the odd one (it read
    "no majority says which side is wrong", both ranks suspects)."""
    job, verdict = _settled_mismatch("es_rank0", tmp_path)
    assert verdict["suspects"] == [job.launcher], verdict
    summary = verdict["summary"]
    assert "Both are in ModelCheckpoint.on_train_epoch_end (lightning/pytorch/callbacks/" \
        "model_checkpoint.py), rank 1 further along" in summary, summary
    assert "rank 0 made one collective more than rank 1 before this point" in summary, summary


def test_a_broadcast_in_prepare_data_is_rank_0s_alone(tmp_path: Path) -> None:
    """GIVEN a broadcast inside a LightningDataModule's ``prepare_data`` (blind round 40's 07,
    Lightning#2299) THEN rank 0 is the odd one: Lightning runs that hook on local rank 0 only
    while rank 1 waits in its barrier (it read "rank 1 waits in send": the barrier is gloo's
    monitored_barrier, made of sends; then, a barrier, "no majority")."""
    job, verdict = _settled_mismatch("prepare_bcast", tmp_path)
    assert verdict["suspects"] == [job.launcher], verdict
    summary = verdict["summary"]
    assert "rank 1 waits in barrier" in summary, summary
    assert "Rank 0 calls broadcast_object_list inside main.<locals>.Chars.prepare_data " \
        "(lightning_jobs.py:" in summary, summary
    assert "which Lightning runs on local rank 0 only" in summary, summary


def test_a_checkpoint_saved_on_every_rank_trains_on(tmp_path: Path) -> None:
    with _lightning("ckpt_all", tmp_path) as job:
        data = json.loads(dump_json(job.launcher))
    assert data["verdict"]["kind"] == "progressing", data["verdict"]


def test_uneven_batches_per_rank_name_the_rank_that_ran_out(tmp_path: Path) -> None:
    """GIVEN each rank on its own shard, 8 batches on rank 0 and 6 on rank 1: rank 1 ends its
    epoch and waits in ModelCheckpoint's barrier, rank 0 in its 7th batch's broadcast (two
    ranks: no majority) THEN their stacks part in Lightning's fit loop, rank 0 still inside
    the epoch's batch loop and rank 1 past it: rank 1 had fewer batches and is the suspect
    (Lightning#9851; blind round 23's 06 read the tie and named nobody)."""
    job, verdict = _settled_mismatch("uneven", tmp_path)
    assert verdict["suspects"] == [job.pids["rank1"]], verdict
    assert "Rank 1 finished its batches (_TrainingEpochLoop.run) and waits past that loop, " \
        "in _FitLoop.on_advance_end (lightning/pytorch/loops/fit_loop.py:" in \
        verdict["summary"], verdict
