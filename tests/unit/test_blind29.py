"""Blind round 29's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 29).

GIVEN two DeepSpeed ranks whose CPU Adam op's JIT build waits for torch's FileBaton lock file,
left behind by a build killed halfway (pytorch#189245), with no compiler running and both
ranks polling off CPU THEN a lock wait that nobody builds for, both ranks the suspects (it
read "Compiling ... not yet a hang"). GIVEN a gRPC server in ``wait_for_termination`` whose
poller and pool wait for the next call, and a probe asleep between its calls THEN idle,
nobody blamed (it read "unknown": "Blocked: ... waits on a lock at _wait_once"). GIVEN an RL
loop whose weight update paused its vLLM server (POST /pause?mode=keep) and never resumed it,
its rollouts waiting on the server THEN "Paused and never resumed" from the scheduler's own
log line, the loop the suspect (it blamed the EngineCore's idle loop). GIVEN the same pause
read seconds after it, nobody asking, the Worker still spinning in its message wait THEN idle
(it read a wait chain: the spin's CPU counted as work). GIVEN a parent waiting in Queue.get
for a result its worker's feeder thread could not pickle (the traceback in the log) THEN "A
message lost", the workers that put on the queue the suspects (it read a deadlock between the
parent and a worker over their pipes, the parent the suspect). GIVEN a Ray async actor whose
plain method waits on a threading.Condition on the actor's event loop, the async method that
would notify it queued behind it THEN the loop blocked in a synchronous wait, the actor the
suspect, the learner and the rollout worker behind it (it read a wait chain ending at "waits
on a lock").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

BLIND = Path(__file__).parent.parent / "fixtures" / "blind"
FRAMEWORKS = BLIND.parent / "frameworks"


def test_given_ranks_polling_a_build_lock_nobody_builds_for_then_a_hang() -> None:
    snap = analyze(load(BLIND / "ds_stale_build_lock.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.LOCK_WAIT, verdict
    ranks = tuple(p.pid for p in snap.ranks)
    assert len(ranks) == 2 and sorted(verdict.suspects) == sorted(ranks), verdict
    assert verdict.summary.startswith("A build nobody runs: ranks 0-1 wait for torch's JIT "
                                      "build lock (FileBaton"), verdict.summary
    assert "at <module> (train.py:36)" in verdict.summary, verdict.summary


def test_given_a_grpc_server_waiting_for_termination_then_idle() -> None:
    snap = analyze(load(BLIND / "grpc_server_idle.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.IDLE, verdict
    assert verdict.suspects == (), verdict
    assert "is idle at main (server.py:68)" in verdict.summary, verdict.summary



def test_given_an_engine_paused_and_never_resumed_then_the_waiting_loop_is_blamed() -> None:
    snap = analyze(load(BLIND / "vllm_paused_never_resumed.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (snap.job.target,), verdict
    assert verdict.summary.startswith("Paused and never resumed: vllm's log says \"setting "
                                      "pause state to PAUSED_ALL\" and no resume since"), (
        verdict.summary)
    assert "waits at rollout.<locals>.<listcomp> (rl_loop.py:69)" in verdict.summary


def test_given_a_paused_engine_nobody_asks_with_its_worker_still_spinning_then_idle() -> None:
    raw = load(FRAMEWORKS / "vllm_paused_nobody_asks.dump.json")
    worker = next(p for p in raw.processes if p.title == "VLLM::Worker")
    spin = next(r for r in raw.progress.ranks if r.pid == worker.pid)  # type: ignore[union-attr]
    assert spin.spins, spin  # it spun in its message wait (sched_yield), at 1.5% of a core
    for cpu in (worker.cpu_percent, 28.0):  # as read, and as the first run read it (28%)
        procs = tuple(replace(p, cpu_percent=cpu) if p is worker else p
                      for p in raw.processes)
        verdict = analyze(replace(raw, processes=procs)).verdict
        assert verdict is not None and verdict.kind is VerdictKind.IDLE, (cpu, verdict)
        assert verdict.suspects == (), verdict


def test_given_a_result_the_feeder_thread_dropped_then_a_lost_message() -> None:
    snap = analyze(load(BLIND / "mp_queue_lost_put.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    parent = snap.job.target
    workers = sorted(p.pid for p in snap.processes if p.pid != parent and p.threads
                     and p.role.value == "other")
    assert list(verdict.suspects) == workers, verdict
    assert verdict.summary.startswith("A message lost: "), verdict.summary
    assert f"PID {parent} (python) waits in Queue.get at main (embed_corpus.py:85)" in (
        verdict.summary)


def test_given_an_async_actors_loop_blocked_in_a_sync_method_then_the_loop_is_named() -> None:
    snap = analyze(load(BLIND / "ray_async_actor_sync_wait.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    store = next(p.pid for p in snap.processes if (p.title or "").startswith(
        "ray::WeightStore"))
    assert verdict.suspects == (store,), verdict
    assert verdict.summary.startswith("Event loop blocked in a synchronous wait: "), verdict
    assert "inside WeightStore.wait_for_version (driver.py:39)" in verdict.summary
    assert "(ray actor RolloutWorker.run) waits" in verdict.summary, verdict.summary
