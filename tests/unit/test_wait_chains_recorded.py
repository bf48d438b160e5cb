"""Chains across processes on real recorded dumps (tests/fixtures/chains, issue 17).

GIVEN a real dump of a job of tests/targets/chain_jobs.py (``record_chains.py``), analysed
again by the current analyzer, THEN this verdict and these suspects. And where the shape is
absent (the other recorded dumps), the new rules and patterns do not hold.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from support import reanalysed

from hangscope.analyze import analyze
from hangscope.analyze.evidence.facts import facts_of
from hangscope.analyze.rules.elsewhere import skipped_collective
from hangscope.model import Process, Snapshot, VerdictKind
from hangscope.model.serialize import load

CHAINS = Path(__file__).resolve().parent.parent / "fixtures" / "chains"
GRAPH = Path(__file__).resolve().parent.parent / "fixtures" / "waitgraph"


@cache
def dump(name: str, where: Path = CHAINS) -> Snapshot:
    return analyze(load(where / f"{name}.dump.json"))


def _pid(snap: Snapshot, test: object) -> int:
    return next(p.pid for p in snap.processes if test(p))  # type: ignore[operator]


def _script_arg(proc: Process, mode: str) -> bool:
    return len(proc.cmdline) > 2 and proc.cmdline[2] == mode


def test_given_a_zombie_shell_and_a_daemon_holding_its_pipe_then_the_daemon_not_a_rank() -> None:
    snap = dump("daemon_output")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    shell = _pid(snap, lambda p: p.is_zombie)
    daemon = _pid(snap, lambda p: _script_arg(p, "daemon"))
    assert verdict.suspects == (daemon,)
    assert f"its child PID {shell} already exited with code 0, a zombie not reaped yet" \
        in verdict.summary
    assert "reparented to PID 1, inherited the write end" in verdict.summary
    assert not facts_of(snap).has_ranks  # a tool and a shell: no world of ranks


def test_given_a_prompt_on_a_stdin_pipe_then_the_prompt_not_the_pipe_cycle() -> None:
    snap = dump("asker")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    child = _pid(snap, lambda p: _script_arg(p, "asker_child"))
    assert verdict.suspects == (child,)
    assert verdict.summary.startswith("A prompt nobody answers: ")
    assert "waits for input on its stdin (pipe" in verdict.summary
    assert snap.wait_graph is not None
    assert "cycle" not in {p.kind for p in snap.wait_graph.patterns}


def test_given_a_rank_in_a_store_get_while_the_others_all_reduce_then_it_is_the_odd_one() -> None:
    snap = dump("early_store")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    odd = _pid(snap, lambda p: p.rank is not None and p.rank.global_rank == 1)
    assert verdict.suspects == (odd,)
    assert "rank 1 waits on the c10d store (TCPStore wait/get)" in verdict.summary


def test_given_one_rank_in_all_reduce_and_one_in_a_store_get_then_a_tie_not_the_owner() -> None:
    """Two ranks: skipping the collective and entering one the other never calls look the
    same, so both are suspects (not rank 0 alone as the store's owner)."""
    snap = dump("early_pair")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    ranks = {p.rank.global_rank: p.pid for p in snap.processes
             if p.rank is not None and p.rank.global_rank is not None}
    assert verdict.suspects == (ranks[1], ranks[0])  # the store waiter first
    assert "no majority says which side is wrong" in verdict.summary


def test_given_pool_workers_inside_waiting_tasks_then_the_pool_is_saturated() -> None:
    snap = dump("pool_chain")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.summary.startswith("Pool saturated: ")
    workers = {p.pid for p in snap.processes if any(
        f.name == "stitch" for t in p.threads for f in t.frames)}
    assert len(workers) == 2 and set(verdict.suspects) == workers


def test_given_a_callback_into_a_single_threaded_server_then_a_deadlock_over_tcp() -> None:
    snap = dump("callback")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert snap.wait_graph is not None
    backlog = [e for e in snap.wait_graph.edges if "accept queue" in e.how]
    assert len(backlog) == 1 and backlog[0].to_pid in verdict.suspects
    assert "serve requests on more threads" in verdict.summary


@pytest.mark.parametrize("name", ["mismatch", "straggler", "deadlock", "tie", "progressing"])
def test_given_no_store_waiter_then_no_skipped_collective(name: str) -> None:
    assert skipped_collective(facts_of(reanalysed(name))) is None


def test_given_a_lost_pool_result_then_it_stays_lost_not_saturated() -> None:
    snap = dump("pool_lost", GRAPH)
    assert snap.wait_graph is not None
    kinds = {p.kind for p in snap.wait_graph.patterns}
    assert "lost_result" in kinds and "pool_saturated" not in kinds


def test_given_a_child_filling_its_stdout_pipe_then_still_a_cycle_not_a_prompt() -> None:
    snap = dump("popen_pipe", GRAPH)
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.DEADLOCK
    assert snap.wait_graph is not None
    assert "prompt" not in {p.kind for p in snap.wait_graph.patterns}


def test_given_a_supervisor_that_woke_to_restart_a_replica_then_still_a_crash_loop() -> None:
    # Recorded from tests/targets/restart_jobs.py crashing under load: the supervisor's stack
    # moved in the window (os.wait returned, Popen, os.wait again); it waits all the same.
    snap = dump("crash_loop_waking")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.summary.startswith("Crash loop"), verdict.summary
    supervisor = _pid(snap, lambda p: p.title == "replica-supervisor")
    thread = next(p for p in snap.processes if p.pid == supervisor).working_thread
    assert thread is not None and thread.unchanged_samples < thread.samples  # it moved
    assert supervisor not in verdict.suspects and verdict.suspects
