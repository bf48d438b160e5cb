"""DeepSpeed 0.19 on CPU (``DS_ACCELERATOR=cpu``, gloo), 2 ranks under DeepSpeed's own launcher
(``deepspeed`` -> ``deepspeed.launcher.launch`` -> the ranks; tests/targets/frameworks/
deepspeed_jobs.py).

GIVEN ZeRO-2 or ZeRO-3 training that progresses, THEN progressing. GIVEN a ZeRO-3 evaluation
where rank 1 had the shorter share of prompts (deepspeedai/DeepSpeed#4910): rank 0's next
forward waits in ZeRO-3's parameter all_gather, started without waiting and waited for through
DeepSpeed's own handle (c10d's ``Work::wait``, no torch.distributed frame), while rank 1 waits
in the barrier after its loop, THEN mismatched collectives with rank 1 the odd one (it left the
loop), each at the program's own line. GIVEN ``save_checkpoint`` called under ``if rank == 0``
(deepspeedai/DeepSpeed#797, #2993), THEN rank 0 is the odd one and the sentence names the test;
call sites are the program's lines, not DeepSpeed's communication wrappers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target
from targets.hang_shapes import free_port

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "deepspeed_jobs.py"
DEEPSPEED = Path(sys.executable).parent / "deepspeed"


def _deepspeed(mode: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    workdir = tmp_path / mode
    argv = [str(DEEPSPEED), "--num_gpus", "2", "--master_port", str(free_port()), str(JOBS),
            mode, str(workdir / "ready"), str(workdir)]
    # The first run builds DeepSpeed's shared-memory comm op (a C++ JIT build, cached after).
    return running_target(argv, workdir, tags=["rank0", "rank1"], timeout=240,
                          env={"DS_ACCELERATOR": "cpu"})


@pytest.mark.parametrize("mode", ["ds_progress", "ds_progress3"])
def test_zero_training_that_progresses_is_progressing(mode: str, tmp_path: Path) -> None:
    with _deepspeed(mode, tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def test_a_zero3_forward_against_a_rank_done_with_its_shorter_share_is_that_ranks_mismatch(
        tmp_path: Path) -> None:
    with _deepspeed("ds_uneven_eval", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [job.pids["rank1"]], verdict
    summary = verdict["summary"]
    assert "rank 0 waits in all_gather at uneven_eval (deepspeed_jobs.py:" in summary, summary
    assert "rank 1 waits in barrier at uneven_eval (deepspeed_jobs.py:" in summary, summary
    assert "Rank 1 waits after the loop" in summary, summary


def test_save_checkpoint_under_a_rank_test_makes_that_rank_the_odd_one(tmp_path: Path) -> None:
    with _deepspeed("ds_save_rank0", tmp_path) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [job.pids["rank0"]], verdict
    summary = verdict["summary"]
    assert "rank 0 waits in barrier at train (deepspeed_jobs.py:" in summary, summary
    assert "rank 1 waits in all_reduce at train (deepspeed_jobs.py:" in summary, summary
    assert "under `if rank == 0:`" in summary, summary
