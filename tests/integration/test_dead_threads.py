"""A thread that died while the job waits for its work, on real processes
(tests/targets/dead_thread_jobs.py).

GIVEN a trainer whose prefetch thread died of a KeyError (threading's traceback in the job's
log) while its main thread polls for the batches that thread would have made and a forked
metrics agent waits on the trainer's Event THEN a dead thread: the trainer suspected, the
function and the error named, both waiters listed. GIVEN the same error where the trainer
started a new prefetch thread on the same function (it polls for the next shard) THEN no
thread is called dead: the forked agent, which shares the log and the file, is not taken
for the one whose thread died either.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump

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
