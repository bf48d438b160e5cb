"""Ray producers held up by their own callers (tests/targets/frameworks/ray_jobs.py): a
streaming generator with backpressure, and a threaded actor holding its lock across a get.

GIVEN a streaming generator task (``num_returns="streaming"``,
``_generator_backpressure_num_objects=2``) whose driver first waits for it to finish
(``ray.get(gen.completed())``) and only then would iterate it (ray-project/ray#40285; blind
round 35's 05, which read "tasks nobody runs", the paused generator "idle between calls"),
THEN a deadlock between the driver and the generator's worker, paused inside its yield
(Ray's native ``WaitUntilObjectConsumed``), the driver the suspect, and the advice to iterate
the generator as it yields. GIVEN the twin whose driver reads each shard as it comes, THEN
progressing. GIVEN a threaded actor holding its lock in ray.get of replicas that call its
get_shard back (verl#7423; blind round 36's 06) THEN a deadlock through the lock, the
get_shard threads named; GIVEN it released before the get THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import RAY_GROUP, Target, dump_json, poll
from test_ray import _in_ray_get, _ray, _waiting_on

pytestmark = [pytest.mark.frameworks, pytest.mark.xdist_group(RAY_GROUP)]


def test_a_driver_waiting_for_a_paused_generator_to_finish_is_a_deadlock_with_it(
        tmp_path: Path) -> None:
    verdict, job = _waiting_on("generator_held", "reader", tmp_path)
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [job.launcher], verdict  # the caller that never consumes
    summary = verdict["summary"]
    assert f"PID {job.pids['reader']} (" in summary, summary
    assert "waits on its caller to take what its generator yielded" in summary, summary
    assert "pauses inside its yield until its caller consumes what it yielded" in summary
    assert "Iterate the generator as it yields" in summary, summary


def test_a_driver_reading_a_paused_generator_as_it_yields_progresses(tmp_path: Path) -> None:
    with _ray("generator_read", tmp_path, ["reader", "driver"]) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert "generator" not in verdict["summary"], verdict


def test_a_threaded_actor_holding_its_lock_across_a_get_its_callers_call_back_is_a_deadlock(
        tmp_path: Path) -> None:
    """verl#7423 (blind round 36's 06): the store holds its lock in ray.get of the replicas'
    syncs, each of which calls the store's get_shard, which waits for that lock on another of
    the store's threads. The cycle goes through the get_shard threads and the lock (it read
    the actors' gets alone, "one of them must act first")."""
    verdict, job = _waiting_on("publish_locked", "store", tmp_path)
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [job.pids["store"]], verdict
    summary = verdict["summary"]
    assert "wait for self._lock (taken at ShardStore.get_shard (ray_jobs.py:" in summary, summary
    assert "Release the lock before the wait" in summary, summary


def test_a_threaded_actor_that_releases_its_lock_before_the_get_progresses(
        tmp_path: Path) -> None:
    with _ray("publish_staged", tmp_path, ["driver"]) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def _queued(mode: str, tmp_path: Path) -> tuple[dict[str, Any], Target]:
    with _ray(mode, tmp_path, ["runner", "driver"]) as job:
        poll(lambda: _in_ray_get(job.launcher), f"PID {job.launcher} inside ray.get", 60)
        data = json.loads(dump_json(job.launcher))
    return data["verdict"], job


def test_a_call_queued_behind_an_actor_method_that_loops_names_the_actor(
        tmp_path: Path) -> None:
    """ray#20475 (blind round 37's 02, which read "progressing": the loop's actors work): the
    driver's call waits in the actor's queue behind run, a while loop that never returns."""
    verdict, job = _queued("poll_loop", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.pids["runner"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("A call queued behind a method that loops"), summary
    assert "to run executed, which it submitted, queued behind run" in summary, summary
    assert "stands in a while loop" in summary and "TaskRunner.run (ray_jobs.py:" in summary
    assert "make the actor threaded" in summary, summary


def test_a_call_queued_behind_a_batch_that_ends_waits_for_work(tmp_path: Path) -> None:
    verdict, _ = _queued("batch_loop", tmp_path)
    assert verdict["kind"] == "progressing", verdict
    assert "queued" not in verdict["summary"], verdict


def test_a_driver_pausing_between_quick_calls_it_waits_for_progresses(tmp_path: Path) -> None:
    """Each call's get (no timeout) returns with its result; the dump catches the driver in
    its sleep between calls, the window inside the get now and then: the loop's get, read
    from its source (``Frame.loop_gets``), says each return is a result (it read "all
    waiting": a timer's wake-ups on one line)."""
    with _ray("poll_driver", tmp_path, ["driver"]) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict
