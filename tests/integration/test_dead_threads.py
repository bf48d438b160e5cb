"""A thread that died while the job waits for its work, on real processes
(tests/targets/dead_thread_jobs.py).

GIVEN a trainer whose prefetch thread died of a KeyError (threading's traceback in the job's
log) while its main thread polls for the batches that thread would have made and a forked
metrics agent waits on the trainer's Event THEN a dead thread: the trainer suspected, the
function and the error named, both waiters listed. GIVEN the same error where the trainer
started a new prefetch thread on the same function (it polls for the next shard) THEN no
thread is called dead: the forked agent, which shares the log and the file, is not taken
for the one whose thread died either. GIVEN torchrun's agent, whose ``RendezvousKeepAliveTimer``
thread waits in ``Event.wait`` between beats, and rank 1 waiting in ``Queue.get`` for a loader
thread that died (its traceback in the job's shared output) while rank 0 waits in all_reduce
for it (tests/targets/keepalive_jobs.py) THEN rank 1 is the suspect, never the agent; GIVEN
both ranks fed by a live loader (the healthy twin) THEN progressing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_dump, settled_dump

JOBS = TARGETS / "dead_thread_jobs.py"


def test_a_dead_prefetch_thread_whose_batches_the_trainer_polls_for_is_the_suspect(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "died", tmp_path, ["trainer", "agent"])
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["summary"].startswith("A thread died"), verdict["summary"]
    assert "ran prefetch" in verdict["summary"] and "KeyError: 'tokens'" in verdict["summary"]
    assert f"PID {pids['agent']} (metrics-agent) waits" in verdict["summary"], verdict
    assert verdict["suspects"] == [pids["trainer"]], verdict


def test_a_prefetch_thread_started_again_on_the_same_function_is_not_dead(
        tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "restarted", tmp_path, ["trainer", "agent", "prefetch"])
    assert "thread died" not in data["verdict"]["summary"], data["verdict"]


KEEPALIVE_JOBS = TARGETS / "keepalive_jobs.py"


@pytest.mark.extended
def test_a_rank_whose_loader_died_is_the_suspect_not_torchruns_keep_alive_timer(
        tmp_path: Path) -> None:
    data, pids = job_dump("died", tmp_path, ["rank0", "rank1"], KEEPALIVE_JOBS)
    verdict = data["verdict"]
    assert (verdict["kind"], verdict["suspects"]) == ("wait_chain", [pids["rank1"]]), verdict
    summary = verdict["summary"]
    assert f"Rank 1 (PID {pids['rank1']}) waits in Queue.get at rank_main" in summary, summary
    assert "thread loader died" in summary and "KeepAlive" not in summary, summary


@pytest.mark.extended
def test_ranks_fed_by_a_live_loader_under_torchrun_are_progressing(tmp_path: Path) -> None:
    data, _ = job_dump("steady", tmp_path, ["rank0", "rank1"], KEEPALIVE_JOBS)
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
