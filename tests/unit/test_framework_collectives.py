"""The frameworks' own collectives, on real captures (tests/fixtures/frameworks/deepspeed_*
and ray_train_*.dump.json, taken by ``hangscope dump`` of the jobs in tests/targets/frameworks/
deepspeed_jobs.py and ray_train_jobs.py) read again.

GIVEN ZeRO-3's parameter all_gather, started without waiting and waited for through
DeepSpeed's own handle (c10d's ``Work::wait`` under ``AllGatherCoalescedHandle.wait``: no
torch.distributed frame names it), THEN the thread waits in a collective, all_gather, at the
program's own line (not torch's ``_disable_dynamo`` wrapper), and the rank that left its loop
for the barrier is the odd one. GIVEN DeepSpeed's communication wrappers between the program
and torch.distributed, THEN a call site is the program's line, not ``deepspeed/comm``'s.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.classify import call_site, classify_thread
from hangscope.analyze.graph.objectedges import awaiting_call, sleeping_method
from hangscope.frameworks import collective_at
from hangscope.model import Category, Frame, Thread, VerdictKind
from hangscope.model.serialize import load

FRAMEWORKS = Path(__file__).parent.parent / "fixtures" / "frameworks"
_PARTITION = "/venv/lib/python3.11/site-packages/deepspeed/runtime/zero/partition_parameters.py"


def _rank(snap, n: int) -> int:  # type: ignore[no-untyped-def]
    return next(p.pid for p in snap.ranks if p.rank is not None and p.rank.global_rank == n)


def test_given_zero3_forward_against_a_rank_past_its_loop_then_that_rank_is_the_odd_one() -> None:
    snap = analyze(load(FRAMEWORKS / "deepspeed_zero3_uneven_eval.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    assert verdict.suspects == (_rank(snap, 1),), verdict
    assert "rank 0 waits in all_gather at uneven_eval (deepspeed_jobs.py:85)" in verdict.summary
    assert "Rank 1 waits after the loop" in verdict.summary, verdict.summary


def test_given_save_checkpoint_on_rank_0_only_then_sites_are_the_programs_lines() -> None:
    snap = analyze(load(FRAMEWORKS / "deepspeed_save_rank0.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    assert verdict.suspects == (_rank(snap, 0),), verdict
    assert "rank 0 waits in barrier at train (deepspeed_jobs.py:68)" in verdict.summary
    assert "rank 1 waits in all_reduce at train (deepspeed_jobs.py:60)" in verdict.summary
    assert "deepspeed/comm" not in verdict.summary, verdict.summary


def _thread(*frames: Frame) -> Thread:
    return Thread(tid=1, name="MainThread", state="S", frames=frames, wchan="futex_do_wait")


def test_given_a_handle_wait_over_c10d_work_wait_then_a_collective_the_handle_names() -> None:
    thread = classify_thread(_thread(
        Frame("pthread_cond_wait", "libc.so.6", native=True),
        Frame("c10d::Work::wait", "libtorch_cpu.so", native=True),
        Frame("instrument_w_nvtx.<locals>.wrapped_fn", "/venv/deepspeed/utils/nvtx.py", 33),
        Frame("AllGatherCoalescedHandle.wait", _PARTITION, 765),
        Frame("step", "/srv/job/train.py", 12)))
    assert thread.category is Category.COLLECTIVE and thread.op == "all_gather", thread


def test_given_a_wait_of_another_class_then_no_op_from_the_framework() -> None:
    assert collective_at("AllGatherCoalescedHandle.wait", _PARTITION) == "all_gather"
    assert collective_at("AllReduceCoalescedHandle.wait", _PARTITION) == "all_reduce"
    assert collective_at("NoGatherHandle.wait", _PARTITION) is None
    assert collective_at("AllGatherCoalescedHandle.wait", "/srv/job/handles.py") is None
    assert collective_at(None, _PARTITION) is None


def test_given_wrappers_of_torch_and_typing_extensions_then_the_site_is_the_programs_line() -> None:
    """torch's ``_disable_dynamo`` (torch/_compile.py), its custom ops' autograd wrapper
    (torch/_library/: DTensor's redistribute waits there) and ``typing_extensions.deprecated``'s
    wrapper (DeepSpeed calls ``reduce_scatter_tensor`` through it) are plumbing."""
    site = call_site((
        Frame("reduce_scatter_tensor", "/venv/torch/distributed/distributed_c10d.py", 4900),
        Frame("deprecated.__call__.<locals>.wrapper", "/venv/typing_extensions.py", 3140),
        Frame("_disable_dynamo.<locals>.inner", "/venv/torch/_compile.py", 54),
        Frame("make_autograd_impl.<locals>.forward_no_grad", "/venv/torch/_library/autograd.py",
              41),
        Frame("reduce_scatter_fn", "/venv/deepspeed/comm/comm.py", 300),
        Frame("train", "/srv/job/train.py", 62)))
    assert site == "train (train.py:62)", site


def test_given_ray_train_report_on_rank_0_alone_then_a_mismatch_under_its_test() -> None:
    """tests/fixtures/frameworks/ray_train_report_rank0.dump.json: Ray Train's report is a
    collective of its workers (a barrier through its SynchronizationActor; ray-project/ray#50874):
    rank 0 waits there, under ``if rank == 0:``, rank 1 in the next step's DDP all_reduce. Both
    rules that break the tie agree (the step's all_reduce is the normal path, rank 0's call is
    under a rank test); the sentence is the one that says what to change."""
    snap = analyze(load(FRAMEWORKS / "ray_train_report_rank0.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    assert verdict.suspects == (_rank(snap, 0),), verdict
    summary = verdict.summary
    assert "rank 0 waits in ray.train.report at train_loop (ray_train_jobs.py:56)" in summary
    assert "Rank 0 calls ray.train.report under `if rank == 0:`" in summary, summary


def test_given_a_handle_wait_read_without_native_frames_then_still_its_collective() -> None:
    """A Python-only dump (``--no-native``) has no ``Work::wait``: DeepSpeed's handle alone
    says the thread waits in ZeRO-3's all_gather."""
    thread = classify_thread(_thread(
        Frame("instrument_w_nvtx.<locals>.wrapped_fn", "/venv/deepspeed/utils/nvtx.py", 33),
        Frame("AllGatherCoalescedHandle.wait", _PARTITION, 765),
        Frame("step", "/srv/job/train.py", 12)))
    assert thread.category is Category.COLLECTIVE and thread.op == "all_gather", thread
    assert thread.site == "step (train.py:12)", thread


def test_given_ray_train_workers_waiting_for_the_controllers_poll_then_slow_not_hung() -> None:
    """tests/fixtures/frameworks/ray_train_report_paced.dump.json: a healthy Ray Train job that
    reports every few steps. Both workers' training threads (``TrainingThread``: the working
    thread, not the actor's main thread in Ray's task loop) wait in report for the controller
    to take their result, which it does at each poll (every 2 s); the controller's event loop
    sleeps with a timer due (epoll_wait's timeout), so its ``run`` awaits no other call and
    the driver's wait on it ends no chain; the driver is no rank. Each training thread, whose
    timed waits the progress window judges (the actor's main thread waits in Ray's task loop),
    went through report and on in the window."""
    snap = analyze(load(FRAMEWORKS / "ray_train_report_paced.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (), verdict
    assert verdict.summary.startswith("Progressing over 2.4 s: ranks 0-1: their Python lines "
                                      "moved."), verdict
    assert all(r.tid != r.pid and "through ray.train.report" in r.reason
               for r in snap.progress.ranks if r.pid in {p.pid for p in snap.ranks}), snap.progress
    for rank in snap.ranks:
        assert (rank.working_thread.name or "").startswith("TrainingThread"), rank
    controller = next(p for p in snap.processes if (p.title or "").startswith(
        "ray::TrainController"))
    kernel = snap.waits.kernel if snap.waits is not None else None
    assert sleeping_method(controller, kernel) == "run"
    assert awaiting_call(controller, kernel) is None
