"""Blind round 36's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 36).

GIVEN Ray Train workers whose training threads sleep for each step's data while the actors'
main threads wait in Ray's task loop THEN progressing (it read "all waiting": healthy called
hung). GIVEN a gRPC token plugin refreshing over its own channel inside its lock
THEN a deadlock in the client. GIVEN a service joining a forked worker that waits for its job
queue THEN the advice to stop it first. GIVEN each rank holding its lock across a collective
while its other thread waits for it THEN a deadlock across the ranks. GIVEN a threaded Ray actor
holding its lock across a get whose tasks call it back THEN the lock is in the cycle.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_ray_train_steps_paced_by_a_sleep_then_progressing() -> None:
    snap = analyze(load(FIXTURES / "ray_train_decode_paced.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (), verdict
    ranks = {p.pid: p.working_tid for p in snap.ranks}
    assert snap.progress is not None
    judged = {r.pid: r.tid for r in snap.progress.ranks if r.pid in ranks}
    assert judged == ranks and all(tid != pid for pid, tid in judged.items()), judged


def test_given_a_token_plugin_refreshing_over_its_own_channel_then_a_deadlock_in_the_client(
) -> None:
    """grpc#22471: the plugin refreshes its token over the credentialed channel inside its
    lock; the refresh call waits for its metadata from a second plugin thread, which waits for
    that lock (it read a chain ending "waits on another process (IPC)")."""
    snap = analyze(load(FIXTURES / "grpc_token_refresh_same_channel.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    client = next(p.pid for p in snap.processes if any(
        (t.name or "").startswith("Thread-41") for t in p.threads))
    assert verdict.suspects == (client,), verdict
    assert "gRPC sends a call only once its call credentials' plugin" in verdict.summary


def test_given_a_lifespan_joining_a_worker_that_waits_for_its_jobs_then_stop_it_first() -> None:
    """uvicorn#2289: the service waits in join() for a forked worker that waits for its job
    queue (it advised reading the child's output, as for a child writing a full pipe). This
    dump predates SigCgt's reading: the advice is to stop the worker before waiting."""
    verdict = analyze(load(FIXTURES / "uvicorn_lifespan_join_forked_worker.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert "tell it to stop before waiting (a sentinel on its queue" in verdict.summary
    assert "read the child's output" not in verdict.summary, verdict.summary


def test_given_each_rank_holding_its_lock_across_a_collective_then_a_deadlock_across_ranks(
) -> None:
    """KempnerForge#104: rank 0's snapshot thread holds the state lock in all_gather on its
    own group, rank 1's main thread holds it in all_reduce, each rank's other thread waits for
    the lock (it read "mismatched collectives", no side the odd one)."""
    verdict = analyze(load(FIXTURES / "ddp_snapshot_lock_across_collectives.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert "thread snapshotter of rank 0 (PID 20181) waits in all_gather" in verdict.summary
    assert "Never hold a lock across a collective" in verdict.summary, verdict.summary


def test_given_a_threaded_actor_holding_its_lock_across_a_get_called_back_then_the_lock_is_named(
) -> None:
    """verl#7423: the store's publish holds its lock in ray.get of the replicas' syncs, which
    call its get_shard back (it read the gets' cycle alone, "one of them must act first")."""
    verdict = analyze(load(FIXTURES / "ray_threaded_store_lock_across_get.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert "2 threads of PID 22842 (ray actor WeightStore.get_shard) wait for self._lock" in \
        verdict.summary, verdict.summary
    assert "Release the lock before the wait" in verdict.summary, verdict.summary
