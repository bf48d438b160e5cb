"""Ray 2.60 actors (tests/targets/frameworks/ray_jobs.py): the driver runs ``ray.init`` and
Ray's own processes are its children, each actor a worker titled ``ray::Class.method``.

GIVEN two actors that ``ray.get`` each other's results inside a method (ray-project/ray#3307)
THEN the verdict is a deadlock whose cycle names both actors, and its suspect is one of the
actors' processes: never Ray's own processes (GCS, raylet, agents), never the driver (it waits
on the first actor, a victim). GIVEN one actor that ``ray.get``s results the other computes and
returns, in a loop, THEN it progresses (the progress window watches the actors' workers, never
Ray's own processes); GIVEN idle actors and a sleeping driver,
THEN nothing is a deadlock and nobody is blamed; GIVEN idle actors and a driver parked on a bare
``threading.Event().wait()`` (serve forever) THEN idle, no lost wake-up, nobody blamed. One
Ray start per test (each mode is its own driver, and a cycle cannot be undone but by killing
the actors).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import RAY_GROUP, TARGETS, Target, dump_json, poll, running_target

pytestmark = [pytest.mark.frameworks, pytest.mark.xdist_group(RAY_GROUP)]

JOBS = TARGETS / "frameworks" / "ray_jobs.py"
#: Ray starts its GCS, raylet and agents before the first actor: ~7 s on an idle 2-core machine.
START_TIMEOUT = 120


@contextmanager
def _ray(mode: str, tmp_path: Path, tags: list[str]) -> Iterator[Target]:
    workdir = tmp_path / mode
    argv = [sys.executable, str(JOBS), mode, str(workdir / "ready"), str(workdir)]
    with running_target(argv, workdir, tags=tags, timeout=START_TIMEOUT,
                        env={"RAY_USAGE_STATS_ENABLED": "0"}) as job:
        yield job


def _in_ray_get(pid: int, call: str = "get_objects") -> bool:
    """The actor's main thread is inside ``ray.get`` (its ready line comes just before the
    call), or inside ``call``: py-spy's stack of it says so."""
    pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    out = subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                         timeout=30).stdout
    main = next((t for t in out.split("\nThread ") if '"MainThread"' in t.split("\n", 1)[0]),
                "")
    return call in main


def _io_calls(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = dict(line.split(": ") for line in
                          Path(f"/proc/{pid}/io").read_text().splitlines())
            total += int(fields["syscr"]) + int(fields["syscw"])
    return total


def _quiet(pids: list[int], seconds: float = 2.0) -> None:
    """Wait until none of ``pids`` made a read or write for ``seconds`` (/proc/PID/io)."""
    state = {"calls": _io_calls(pids), "since": time.monotonic()}

    def settled() -> bool:
        calls, now = _io_calls(pids), time.monotonic()
        if calls != state["calls"]:
            state.update(calls=calls, since=now)
        return now - state["since"] >= seconds

    poll(settled, f"no I/O from PIDs {pids} for {seconds} s", 90)


def _ray_system_pids(data: dict) -> set[int]:  # type: ignore[type-arg]
    return {p["pid"] for p in data["processes"] if p["role"] == "helper"}


def test_two_actors_that_ray_get_each_other_are_a_deadlock_between_the_actors(
        tmp_path: Path) -> None:
    with _ray("cycle", tmp_path, ["planner", "executor", "driver"]) as job:
        actors = {job.pids["planner"], job.pids["executor"]}
        for pid in actors:
            poll(lambda pid=pid: _in_ray_get(pid), f"PID {pid} inside ray.get", 60)
        # Settled: Ray's start-up I/O (actor creation, worker registration, their logs) is
        # data moving that the window would read as progress; a user dumps a job long hung.
        _quiet([*actors, job.launcher])
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] and set(verdict["suspects"]) <= actors, verdict
    assert job.launcher not in verdict["suspects"], verdict
    assert not set(verdict["suspects"]) & _ray_system_pids(data), verdict
    summary = verdict["summary"]
    assert "Planner.call_peer" in summary and "Executor.call_peer" in summary, summary
    edges = [e for e in data["wait_graph"]["edges"] if e["kind"] == "object"]
    assert {(e["pid"], e["to_pid"]) for e in edges} >= {
        (job.pids["planner"], job.pids["executor"]), (job.pids["executor"], job.pids["planner"]),
        (job.launcher, job.pids["planner"])}, edges


def test_an_actor_that_ray_gets_results_the_other_returns_progresses(tmp_path: Path) -> None:
    with _ray("chain_ok", tmp_path, ["executor", "planner", "driver"]) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    # The window watches the actors' workers too (the driver only hands work out): the job
    # computes, nobody is blamed.
    assert verdict["kind"] == "progressing", verdict
    assert verdict["suspects"] == [], verdict
    watched = {r["pid"] for r in data["progress"]["ranks"]}
    assert {job.pids["planner"], job.pids["executor"]} <= watched, watched
    assert not watched & _ray_system_pids(data), watched


def test_idle_actors_and_a_waiting_driver_are_no_deadlock_and_nobody_is_blamed(
        tmp_path: Path) -> None:
    with _ray("idle", tmp_path, ["planner", "executor", "driver"]) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] not in ("deadlock", "wait_chain"), verdict
    assert verdict["suspects"] == [], verdict
    assert not [e for e in data["wait_graph"]["edges"] if e["kind"] == "object"], verdict


def test_a_driver_parked_on_an_event_beside_idle_actors_is_idle_and_nobody_is_blamed(
        tmp_path: Path) -> None:
    with _ray("idle_event", tmp_path, ["planner", "executor", "driver"]) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    # One thread of the program parked on an Event no thread sets (Ray's own GC thread waits
    # on its own): a serve-forever driver, not a lost wake-up; the actors wait between tasks.
    assert verdict["kind"] == "idle", verdict
    assert verdict["suspects"] == [], verdict
    assert "lost_wakeup" not in {p["kind"] for p in data["wait_graph"]["patterns"]}, verdict


def test_nested_tasks_starved_of_their_slots_blame_no_ray_process_and_read_as_a_wait(
        tmp_path: Path) -> None:
    """ray#231 / ray#25239: each parent task waits in ``ray.get`` on a nested task that no
    slot is left to run. The plain task's ObjectID names no actor (no edge); what the verdict
    must not do is blame Ray's own processes, or call the job moving or idle."""
    with _ray("nested_starved", tmp_path, ["parent", "driver"]) as job:
        parent = job.pids["parent"]  # (the first parent's ready line; both wait alike)
        poll(lambda: _in_ray_get(parent), f"PID {parent} inside ray.get", 60)
        # Settled, as in the cycle case: the driver's start-up I/O (task submission, its
        # logs) moving during the window read "its waits complete and data moves".
        _quiet([parent, job.launcher])
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] not in ("progressing", "idle", "paused"), verdict
    assert not set(verdict["suspects"]) & _ray_system_pids(data), verdict
    # the parents, each waiting for its nested task while holding the slot it needs (blind
    # round 34's 03, GPUs held across a nested ray.get, read a wait chain ending "waits on a
    # lock" in the parent's get)
    parents = {p["pid"] for p in data["processes"] if p.get("title") == "ray::parent"}
    assert len(parents) == 2 and set(verdict["suspects"]) == parents, verdict
    assert verdict["summary"].startswith("Tasks nobody runs: "), verdict
    assert "for results of tasks it submitted" in verdict["summary"], verdict
    assert "gives back its CPU, not its GPUs, custom resources" in verdict["summary"], verdict
    decided = {r["pid"]: r["decision"] for r in data["progress"]["ranks"]}
    assert job.launcher in decided and decided[job.launcher] not in ("progressing", "idle")


def test_a_driver_waiting_on_a_consumer_of_a_queue_nobody_fills_names_the_consumer(
        tmp_path: Path) -> None:
    """ray#19416: the consumer task waits in ``Queue.get`` for an end marker the producer,
    done, never put; the driver waits on the consumer. The driver's get is on a plain task's
    result, so its chain goes through the task that waits in turn (blind round 18's 05 read
    the driver waiting on the queue's actor, past the consumer)."""
    with _ray("queue_short", tmp_path, ["consumer", "driver"]) as job:
        consumer = job.pids["consumer"]
        poll(lambda: _in_ray_get(consumer), f"PID {consumer} inside ray.get", 60)
        _quiet([consumer, job.launcher])
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    summary = verdict["summary"]
    # Its get awaits a put no live process makes (blind round 18's 05 named the queue's
    # actor the suspect, "waits on a lock"): the consumer is the suspect, at its own line.
    assert summary.startswith("A call nobody makes: "), summary
    assert "(called from consume (ray_jobs.py:" in summary, summary
    assert "to return its get" in summary, summary
    assert verdict["suspects"] == [consumer], verdict


def test_a_consumer_waiting_for_a_producer_that_computes_the_next_item_is_progressing(
        tmp_path: Path) -> None:
    """The twin: the queue's get awaits a put that the producer task, computing, will make."""
    with _ray("queue_slow", tmp_path, ["consumer", "driver"]) as job:
        consumer = job.pids["consumer"]
        poll(lambda: _in_ray_get(consumer), f"PID {consumer} inside ray.get", 60)
        data = json.loads(dump_json(job.launcher))
    assert data["verdict"]["kind"] == "progressing", data["verdict"]


def test_an_actor_waiting_for_tasks_that_call_it_back_is_a_deadlock_with_them(
        tmp_path: Path) -> None:
    """Blind round 20's 03 read a wait chain ending at the actor, "waits on a lock": its get
    on its own tasks' results gave no edge (a plain task's result names no producer, and the
    tasks wait themselves); but their gets name the actor (its id), so the edge back to them
    closes a ring one side of which the ids prove."""
    tags = ["coordinator", "shard0", "shard1", "driver"]
    with _ray("callback", tmp_path, tags) as job:
        coordinator, shards = job.pids["coordinator"], {job.pids["shard0"], job.pids["shard1"]}
        for pid in (coordinator, *shards):
            poll(lambda pid=pid: _in_ray_get(pid), f"PID {pid} inside ray.get", 60)
        _quiet([coordinator, *shards, job.launcher])
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [coordinator], verdict
    summary = verdict["summary"]
    assert "ShardCoordinator.run" in summary and "(called from shard_task (ray_jobs.py:" \
        in summary, summary
    assert not set(verdict["suspects"]) & _ray_system_pids(data), verdict


def test_an_actor_whose_tasks_call_it_back_beside_its_method_progresses(
        tmp_path: Path) -> None:
    """The twin: with max_concurrency=4 the reports run beside the method, which returns."""
    with _ray("callback_concurrent", tmp_path, ["coordinator", "driver"]) as job:
        data = json.loads(dump_json(job.launcher))
    assert data["verdict"]["kind"] == "progressing", data["verdict"]


def test_a_driver_waiting_on_a_rate_limited_actor_is_progressing(tmp_path: Path) -> None:
    """Blind round 21's 07 read "all waiting": the driver sits in its get all window, and the
    actor in a one-shot ``time.sleep`` (what is left of its second); the sleep ends and the
    next call's begins: the source shows no loop of its own going round it."""
    with _ray("rate_limited", tmp_path, ["actor", "driver"]) as job:
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert verdict["suspects"] == [], verdict


def test_an_actor_polling_a_flag_nobody_sets_is_not_progressing(tmp_path: Path) -> None:
    """The twin: the method sleeps too, but inside a ``while`` that re-checks a flag."""
    with _ray("flag_poll", tmp_path, ["actor", "driver"]) as job:
        actor = job.pids["actor"]
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] not in ("progressing", "idle", "paused"), verdict
    assert actor in verdict["suspects"] or f"PID {actor}" in verdict["summary"], verdict


def _driver_waits(mode: str, tmp_path: Path, logged: str = "") -> dict[str, Any]:
    """The verdict on a ``mode`` job whose driver waits in ``ray.get`` on what Ray never
    places (once its log says ``logged``): a wait chain, the driver its suspect."""
    with _ray(mode, tmp_path, ["driver"]) as job:
        poll(lambda: _in_ray_get(job.launcher), f"PID {job.launcher} inside ray.get", 60)
        if logged:
            poll(lambda: logged in job.log_tail(), f"{logged!r} in the driver's log", 90)
        _quiet([job.launcher])
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.launcher], verdict
    return verdict


def test_a_driver_waiting_on_an_actor_no_node_can_place_says_the_request_is_infeasible(
        tmp_path: Path) -> None:
    """ray#45909: an actor that asks for a GPU of a CPU-only cluster is never placed; the
    driver waits in ``ray.get`` for ever and only the autoscaler's line in its log says why.
    The verdict names the driver's wait and quotes that line, not the advice for actors that
    hold every CPU."""
    verdict = _driver_waits("infeasible", tmp_path, "No available node types can fulfill")
    assert "No available node types can fulfill resource request" in verdict["summary"]
    assert "'GPU': 1.0" in verdict["summary"] and "infeasible" in verdict["summary"], verdict


def test_a_driver_waiting_on_a_placement_group_no_node_set_can_hold_says_so(
        tmp_path: Path) -> None:
    """ray#27287: a STRICT_SPREAD placement group of two bundles on a one-node cluster stays
    pending; the driver waits in ``ray.get(pg.ready())`` while Ray's idle pool (``ray::IDLE``)
    waits for tasks. No actor holds the CPUs, so that advice would mislead: the verdict says
    what cannot be placed as asked."""
    verdict = _driver_waits("placement", tmp_path)
    assert "a placement group whose strategy the cluster cannot meet" in verdict["summary"]
    assert "actors that hold every CPU" not in verdict["summary"], verdict


def _waiting_on(mode: str, actor: str, tmp_path: Path) -> tuple[dict[str, Any], Target]:
    """The verdict of a dump once the driver waits in ray.get on the actor (tagged
    ``actor``) and neither has read or written for a while; the job, for its PIDs."""
    with _ray(mode, tmp_path, [actor, "driver"]) as job:
        poll(lambda: _in_ray_get(job.launcher), f"PID {job.launcher} inside ray.get", 60)
        _quiet([job.launcher, job.pids[actor]])
        data = json.loads(dump_json(job.launcher))
    return data["verdict"], job


def test_a_release_queued_behind_the_acquire_it_would_wake_names_the_actor(
        tmp_path: Path) -> None:
    """linagora/openrag#965: an async semaphore actor with one slot; a second ``acquire``
    awaits the permit and holds the slot, so the driver's ``release`` waits in the actor's
    queue. The driver's own line submitted ``release`` while the actor's title says
    ``acquire`` runs: the call is made and queued, not missing (blind round 23's 03 read "a
    call nobody makes" and blamed the waiter). The actor is the suspect."""
    verdict, job = _waiting_on("semaphore", "gate", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.pids["gate"]], verdict
    assert verdict["summary"].startswith("A call queued behind its own wait: "), verdict
    assert "to run release, which it submitted, queued behind acquire" in verdict["summary"]
    assert "max_concurrency" in verdict["summary"], verdict


def test_a_sync_method_blocking_an_async_actors_loop_names_the_loop(tmp_path: Path) -> None:
    """ray#44454: an async actor's plain ``def`` method runs on its event loop, and waits on
    a threading.Condition that only its async ``publish`` notifies, queued behind it (blind
    round 29's 05 read a wait chain ending at "waits on a lock"). The actor is the suspect,
    its loop named, the driver behind it."""
    verdict, job = _waiting_on("sync_wait", "store", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.pids["store"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Event loop blocked in a synchronous wait: The asyncio event "
                              f"loop of PID {job.pids['store']} (ray actor "), summary
    assert "inside WeightStore.wait_for_version (ray_jobs.py:" in summary, summary
    assert f"the main process (PID {job.launcher}) waits" in summary, summary


def test_a_call_queued_behind_a_constructor_waiting_for_it_names_the_actor(
        tmp_path: Path) -> None:
    """ray#7379: an actor's ``__init__`` waits for its loader thread, which waits for what only
    the actor's ``configure`` hands it; Ray runs no method before ``__init__`` returns (blind
    round 33's 03 read "a lost wake-up", advice about notify order). The actor is the suspect,
    at its constructor's wait, the driver's ``configure`` queued behind it."""
    verdict, job = _waiting_on("init_waits", "table", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.pids["table"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("A call queued behind a constructor that never returns: "), summary
    assert "to run configure, which it submitted; PID " in summary, summary
    assert "is still in its constructor, FeatureTable.__init__, which does not return: it " \
        "waits at FeatureTable.__init__ (ray_jobs.py:" in summary, summary
    assert "its thread table-loader waits at FeatureTable._load (ray_jobs.py:" in summary
    assert "Ray runs none of an actor's methods until its __init__ has returned" in summary


def test_a_constructor_that_computes_is_no_such_wait(tmp_path: Path) -> None:
    with _ray("init_slow", tmp_path, ["table", "driver"]) as job:
        poll(lambda: _in_ray_get(job.launcher), f"PID {job.launcher} inside ray.get", 60)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert "constructor" not in verdict["summary"], verdict
    assert verdict["kind"] == "progressing", verdict


def test_a_driver_waiting_on_an_actor_restarted_for_ever_names_the_loop_and_its_cause(
        tmp_path: Path) -> None:
    """ray PR #31626, ray#6612 (blind round 43's 06): an actor's ``__init__`` exits the
    process on a truncated config; with ``max_restarts=-1`` Ray restarts it for ever and
    retries its calls, and the driver's ``ray.get`` never returns. Only Ray's own lines in the
    driver's log say so ("There are infinite retries remaining ... The actor is temporarily
    unavailable") and the actor's last words say why (read "Blocked", unknown, before)."""
    retried = "infinite retries remaining"
    with _ray("restart_loop", tmp_path, ["driver"]) as job:
        poll(lambda: _in_ray_get(job.launcher), f"PID {job.launcher} inside ray.get", 60)
        poll(lambda: retried in job.log_tail(20000) and "[scorer] fatal" in job.log_tail(20000),
             "Ray's retry line and the actor's own in the driver's log", 90)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.launcher], verdict
    summary = verdict["summary"]
    assert "Scorer.score" in summary and "restarts" in summary, summary
    assert "[scorer] fatal: cannot load config: JSONDecodeError" in summary, summary
    assert "max_restarts" in summary and "sys.exit" in summary, summary


def test_an_actor_restarted_once_that_then_serves_progresses(tmp_path: Path) -> None:
    """The twin: the first construction exits the same way, the restarted actor reads the
    config whole and serves the driver's calls: the old retry line in the log says nothing of
    now."""
    with _ray("restart_once", tmp_path, ["driver"]) as job:
        poll(lambda: "[scorer] fatal" in job.log_tail(20000), "the actor's exit in the log", 90)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


DATA_JOBS = TARGETS / "frameworks" / "ray_data_jobs.py"


@contextmanager
def _ray_data(mode: str, tmp_path: Path, warned: bool,
              tags: tuple[str, ...] = ("driver",),
              line: str = "blocked waiting on other clients") -> Iterator[Target]:
    workdir = tmp_path / mode
    argv = [sys.executable, str(DATA_JOBS), mode, str(workdir / "ready"), str(workdir)]

    def said(job: Target) -> bool:  # Ray Data's own line (its split warning: 30 s in)
        return not warned or line in job.log_tail()

    with running_target(argv, workdir, tags=list(tags), ready=said, timeout=START_TIMEOUT,
                        env={"RAY_USAGE_STATS_ENABLED": "0"}) as job:
        yield job


def _reported_stall(mode: str, tmp_path: Path, line: str) -> str:
    """The summary of a dump taken once Ray Data logged ``line``: a stall its framework
    reported, the driver (the one process that waits on the pipeline) the suspect."""
    with _ray_data(mode, tmp_path, warned=True, line=line) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.pids["driver"]], verdict
    summary = str(verdict["summary"])
    assert summary.startswith("A stall its framework reported: "), summary
    return summary


def _in_stack_of(title: str, frame: str) -> bool:
    """A process titled ``title`` (Ray's ``ray::Class``) has ``frame`` in py-spy's stacks."""
    pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if cmdline.read_bytes().startswith(title.encode()):
                out = subprocess.run([pyspy, "dump", "--pid", cmdline.parent.name],
                                     capture_output=True, text=True, timeout=30).stdout
                if frame in out:
                    return True
    return False


def test_streaming_splits_read_one_after_the_other_are_a_stall_ray_data_reports(
        tmp_path: Path) -> None:
    """The driver reads split 0 alone; Ray Data's coordinator waits for split 1's consumer
    and warns after 30 s (ray#42008, blind round 28's 05: it read "all waiting")."""
    summary = _reported_stall("split_sequential", tmp_path, "blocked waiting on other clients")
    assert summary.startswith("A stall its framework reported: the main process (PID "), summary
    assert "(ray_data_jobs.py:" in summary, summary
    assert "read them all at once" in summary, summary


@pytest.mark.parametrize("mode", ["split_concurrent", "actor_pool"])
def test_streaming_splits_read_at_once_and_a_live_actor_pool_progress(
        mode: str, tmp_path: Path) -> None:
    """The twins: the splits read at once; a pool of one actor that lives (blind round 42's
    06: its executor's loop goes round while the actor works)."""
    with _ray_data(mode, tmp_path, warned=False) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def test_a_split_consumer_that_stopped_early_is_what_the_coordinator_waits_for(
        tmp_path: Path) -> None:
    """Blind round 40's 04 (ray-project/ray#62040): two consumer actors read a streaming_split
    each; split 0's stops after one epoch on its own decision. Split 1's consumer waits in its
    iterator's thread for an epoch the coordinator starts only once split 0's asks too. The
    chain went driver -> consumer 1's loop waiting on its own iterator's queue, and stopped
    there. It follows the hand-off to the iterator thread, that thread's get to the coordinator
    (--locals of a thread other than the working one), and the coordinator's barrier of calls
    to the consumer of the same class that calls none: the suspect."""
    with _ray_data("split_early_stop", tmp_path, warned=False,
                   tags=("consumer0", "consumer1", "driver")) as job:
        poll(lambda: _in_stack_of("ray::SplitCoordinator", "_barrier"),
             "the coordinator in its epoch barrier", 60)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["consumer0"]], verdict
    summary = verdict["summary"]
    assert f"thread MainThread of PID {pids['consumer1']} (ray actor Consumer.fit) waits in " \
        "get() at iter_threaded" in summary, summary
    assert "(ray actor SplitCoordinator" in summary, summary  # (its title may name the call)
    assert "waits on a call to start_epoch from each of its consumers at " \
        "SplitCoordinator._barrier" in summary, summary
    assert f"PID {pids['consumer0']} (ray actor Consumer) is between tasks at " \
        "Worker.main_loop" in summary, summary
    assert "it never called start_epoch for this round" in summary, summary
    assert "Make the stop decision together" in summary, summary


def test_split_consumers_that_read_as_many_epochs_progress(tmp_path: Path) -> None:
    with _ray_data("split_two_epochs", tmp_path, warned=False,
                   tags=("consumer0", "consumer1", "driver")) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def test_a_group_set_up_one_member_at_a_time_names_the_drivers_loop(tmp_path: Path) -> None:
    """Blind round 39's 05 (ray-project/ray#3307): the driver gets each actor's ``setup`` (a
    torch.distributed ``init_process_group`` for a world of two) before it submits the next:
    the first waits in the rendezvous for the second, never asked. The driver's loop is the
    suspect (it named the actor in the rendezvous, which only waits)."""
    with _ray("setup_serial", tmp_path, ["driver", "rank0", "rank1"]) as job:
        poll(lambda: _in_ray_get(job.pids["rank0"], "init_process_group"), "rank 0 in its "
             "rendezvous", 60)
        poll(lambda: _in_ray_get(job.pids["driver"]), "the driver in ray.get", 60)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
        pids = dict(job.pids)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"][0] == pids["driver"], verdict
    summary = verdict["summary"]
    assert f"PID {pids['rank0']} (ray actor GroupMember.setup) waits in communicator init" \
        in summary, summary
    assert "gets each member's setup before it submits the next" in summary, summary
    assert "submit every member's setup first, then get all the results at once" in summary, \
        summary


def test_a_group_set_up_together_then_training_progresses(tmp_path: Path) -> None:
    with _ray("setup_together", tmp_path, ["driver", "rank0", "rank1", "step0"]) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "progressing", verdict


def test_an_actor_alone_in_a_ray_collective_all_reduce_names_its_idle_peer(
        tmp_path: Path) -> None:
    """OpenRLHF#135 (blind round 30's 04): two actors of a ``ray.util.collective`` gloo group
    all-reduce their stats key by key, rank 0 one key more; rank 1's step returned. The chain
    ends at rank 0 in all_reduce, and says why it waits: its gloo peer (no RANK, found by its
    TCP connections and torch's gloo threads) idles between tasks (it read "waits in
    all_reduce" and stopped there)."""
    with _ray("collective_extra", tmp_path, ["driver", "rank0", "rank1"]) as job:
        _quiet([job.pids["rank0"], job.pids["rank1"]])
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [job.pids["rank0"]], verdict
    summary = verdict["summary"]
    assert "waits in all_reduce at TorchGLOOGroup.allreduce" in summary, summary
    assert f"PID {job.pids['rank1']} (ray actor StatsTrainer), its peer in the gloo group " \
        "(connected over TCP), is in no collective: it idles between tasks at " \
        "Worker.main_loop (ray/_private/worker.py:" in summary, summary


def test_a_pipeline_whose_only_map_actor_exited_is_a_stall_ray_data_reported(
        tmp_path: Path) -> None:
    """Blind round 42's 06 (ray#62746): the pool of one actor keeps the dead actor's slot and
    hands out nothing; the executor's loop goes round on the driver's CPU (it read
    "progressing"). A scheduler thread's moves are no progress while nothing else moves, and
    Ray Data's line about the ignored failure says why, whichever of the driver's threads waits
    in Ray Data's frames (1 run in 4, its working thread slept outside them: "all waiting")."""
    summary = _reported_stall("actor_exits", tmp_path,
                              "Ignoring this exception with remaining max_errored_blocks")
    assert "Ray Data ignored a failed task of MapBatches(Embedder)" in summary, summary
    assert "keeps the dead actor's slot" in summary, summary
