"""The rank tests a frame's line lies under, read from its source
(collect/framework_lines.py): a collective under ``if trainer.is_global_zero:`` is called by
some ranks only (the tie-breaker of analyze/rules/tiebreak.py reads it)."""

from __future__ import annotations

from pathlib import Path

from hangscope.collect.framework_lines import guarded_before, rank_guards

SCRIPT = '''\
import torch.distributed as dist


def on_epoch_end(trainer, accelerator, rank):
    log("epoch done")
    if trainer.is_global_zero:
        trainer.save_checkpoint("x.ckpt")
    if accelerator.is_main_process:
        pass
    else:
        dist.barrier()
    if dist.get_rank() == 0 and rank > 1:
        dist.all_reduce(t)
    if len(items) > 3:
        dist.broadcast(t, 0)
'''


def test_a_line_under_an_if_on_the_rank_names_its_test(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    assert rank_guards(str(path), 7) == ("trainer.is_global_zero (train.py:6)",)
    # the else branch of a test on the rank runs on the other ranks only: guarded too, as
    # the else (blind round 17's 02: "only the ranks that pass that test" was said of it)
    assert rank_guards(str(path), 11) == ("else of accelerator.is_main_process (train.py:8)",)
    assert rank_guards(str(path), 9) == ("accelerator.is_main_process (train.py:8)",)
    assert rank_guards(str(path), 13) == ("dist.get_rank() == 0 and rank > 1 (train.py:12)",)


def test_a_line_outside_or_under_another_test_has_none(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    assert rank_guards(str(path), 5) == ()
    assert rank_guards(str(path), 15) == ()  # a test that names no rank
    assert rank_guards(str(tmp_path / "missing.py"), 3) == ()


DECORATED = '''\
from lightning.pytorch.utilities import rank_zero_only


class Export:
    @rank_zero_only
    def write(self, trainer):
        out = trainer.log_dir
        return out

    @accelerator.on_main_process
    def push(self):
        upload()

    @staticmethod
    def every_rank(trainer):
        return trainer.log_dir
'''


def test_a_line_in_a_function_under_a_rank_decorator_names_the_decorator(
        tmp_path: Path) -> None:
    """Blind round 19's 02 (Lightning#18148): a collective in a ``@rank_zero_only`` method."""
    path = tmp_path / "train.py"
    path.write_text(DECORATED)
    assert rank_guards(str(path), 7) == ("@rank_zero_only (train.py:5)",)
    assert rank_guards(str(path), 12) == ("@accelerator.on_main_process (train.py:10)",)
    assert rank_guards(str(path), 16) == ()


ALIASED = '''\
import torch.distributed as dist

rank = dist.get_rank()
is_main = rank == 0
main_proc = accelerator.is_main_process
seed = 1234 + rank


def step(norm, t):
    if is_main and norm:
        dist.all_reduce(t)
    if main_proc:
        dist.barrier()
    if seed > 3:
        dist.broadcast(t, 0)
'''


def test_a_name_the_file_assigns_a_rank_test_to_is_a_rank_test(tmp_path: Path) -> None:
    """Blind round 40's 02: ``is_main = rank == 0``, then ``if is_main and ...:``: the rank
    test is said with what the name stands for; a name assigned arithmetic on the rank
    (``seed = 1234 + rank``) tests no rank."""
    path = tmp_path / "train.py"
    path.write_text(ALIASED)
    assert rank_guards(str(path), 11) == (
        "is_main and norm [is_main = rank == 0] (train.py:10)",)
    assert rank_guards(str(path), 13) == (
        "main_proc [main_proc = accelerator.is_main_process] (train.py:12)",)
    assert rank_guards(str(path), 15) == ()


LOOP = '''\
def main(fabric, model):
    for step in range(100):
        fabric.backward(model(step))
        if step % 25 == 0 and fabric.is_global_zero:
            print("saving")
            fabric.save("last.ckpt", {"model": model})
        if step % 25 == 0:
            fabric.barrier()


def other(fabric):
    fabric.barrier()
'''


def test_a_line_after_a_call_under_a_rank_test_in_its_loop_names_that_call(
        tmp_path: Path) -> None:
    """Blind round 44's 07 (Lightning#20027): ``fabric.save`` on rank 0 only, then the barrier
    every rank runs: the barrier's line comes after the guarded save in the same loop turn."""
    path = tmp_path / "train.py"
    path.write_text(LOOP)
    assert guarded_before(str(path), 8) == (
        "fabric.save (train.py:6) under step % 25 == 0 and fabric.is_global_zero (train.py:4)",)
    assert guarded_before(str(path), 3) == ()  # before the guarded block in its turn
    assert guarded_before(str(path), 5) == ()  # inside the block: its own guard says so
    assert guarded_before(str(path), 12) == ()  # another function
