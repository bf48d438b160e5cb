"""Blind round 35's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 35).

GIVEN a torch RPC parameter server whose main thread waits in ``rpc.shutdown()`` while its RPC
threads apply the trainers' updates, its ``mp.spawn`` parent reading its error pipe THEN
progressing (it read a wait chain from the launcher to the PS: healthy called hung). GIVEN a
driver waiting for a streaming generator it never iterates THEN a deadlock with it.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_parameter_server_in_its_shutdown_barrier_serving_trainers_then_healthy() -> None:
    verdict = analyze(load(FIXTURES / "rpc_ps_serving_shutdown.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (), verdict


def test_given_one_slurm_task_of_two_run_without_srun_then_a_missing_rank() -> None:
    """Lightning#8707: Lightning reads SLURM_NTASKS=2 but the script ran with python: rank 0
    waits in init_process_group for a rank 1 that never started (it read "all waiting")."""
    verdict = analyze(load(FIXTURES / "lightning_slurm_without_srun.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISSING_RANK, verdict
    assert verdict.summary.startswith("Missing rank: expected 2 ranks (SLURM_NTASKS=2: one task "
                                      "per rank, each started by srun), found rank 0: rank 1 is "
                                      "missing"), verdict.summary


def test_given_a_done_callback_blocking_on_grpcs_channel_thread_then_it_waits_for_itself(
) -> None:
    """grpc#21716: the callback waits in another call's .result() on the channel's only
    thread (it read "a lost wake-up", with advice about notify order)."""
    verdict = analyze(load(FIXTURES / "grpc_callback_self_wait.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert verdict.summary.startswith("Deadlock (a callback waits for the thread that runs it): "
                                      "Thread Thread-4 (_run) of PID "), verdict.summary
    assert "at EmbeddingPipeline._on_lookup_done (job.py:30)" in verdict.summary


def test_given_a_driver_waiting_for_a_paused_streaming_generator_then_a_deadlock_with_it(
) -> None:
    """ray#40285: the driver waits in ray.get(gen.completed()) before iterating a streaming
    generator with backpressure, paused inside its yield (it read "tasks nobody runs", the
    generator's worker "idle between calls")."""
    snap = analyze(load(FIXTURES / "ray_generator_completed_first.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    driver = next(p.pid for p in snap.processes if "job.py" in " ".join(p.cmdline))
    assert verdict.suspects == (driver,), verdict
    assert "pauses inside its yield until its caller consumes what it yielded" in \
        verdict.summary, verdict.summary
