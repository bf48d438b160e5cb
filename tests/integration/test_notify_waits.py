"""Waits that end only when somebody acts, and nobody will: a FIFO's other end, a notify, a lock
held across a wait, a task_done(); and an idle service that merely looks blocked.

GIVEN a real job of tests/targets/notify_jobs.py (each test cites the report it reproduces),
settled (every thread of its tagged processes asleep in the kernel), WHEN ``hangscope dump PID
--format json`` reads it, THEN the verdict names the mechanism and its suspects. No rule reads
these jobs' names: the sentences quote them because they are the jobs' own threads and frames.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support import (
    FAST_WINDOW,
    TARGETS,
    asleep,
    dump_json,
    running_target,
    settled_dump,
)

JOBS = TARGETS / "notify_jobs.py"


def _dump(mode: str, tmp_path: Path, tags: list[str],
          window: tuple[str, ...] = FAST_WINDOW) -> tuple[dict[str, Any], dict[str, int]]:
    return settled_dump(JOBS, mode, tmp_path, tags, window)


@pytest.mark.extended
def test_two_sides_opening_differently_named_fifos_are_named_with_both_paths(
        tmp_path: Path) -> None:
    """Real reports: sagan#16 and topjohnwu/Magisk#5484 (each side opens its own FIFO name,
    each open() waits for a partner forever)."""
    data, pids = _dump("fifo_names", tmp_path, ["indexer", "merger"])
    indexer, merger = pids["indexer"], pids["merger"]
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A FIFO nobody opens: "), summary
    assert sorted(verdict["suspects"]) == sorted([indexer, merger]), verdict
    spool = tmp_path / "job-fifo_names" / "spool"
    assert f"is blocked opening FIFO {spool}/feed-{indexer}.fifo for writing" in summary, summary
    assert f"is blocked opening FIFO {spool}/feed-main.fifo for reading" in summary, summary
    assert "open different FIFOs of" in summary and "derive the path the same way" in summary


def test_threads_waiting_on_a_condition_notified_before_they_waited_are_a_lost_wakeup(
        tmp_path: Path) -> None:
    """Real report: chenshuo/muduo#412 (notify_all() before the waiters wait, and a wait with
    no predicate: every thread sleeps, none is left to wake them)."""
    data, pids = _dump("lost_notify", tmp_path, ["renderer"])
    renderer = pids["renderer"]
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert verdict["suspects"] == [renderer], verdict
    assert summary.startswith(f"A lost wake-up: Every thread of PID {renderer} "), summary
    assert "5 threads (render-0, render-1, render-2 and 2 more) wait in Condition.wait at " \
        "lost_notify.<locals>.render (notify_jobs.py:" in summary, summary
    assert "thread MainThread waits in Queue.get at lost_notify (notify_jobs.py:" in summary
    assert "Condition.wait_for(predicate)" in summary, summary
    assert "lock-order" not in summary, summary


def test_a_lock_held_while_its_holder_waits_on_an_event_is_not_called_an_inversion(
        tmp_path: Path) -> None:
    """Real report: python/cpython#101320-style (a thread waits on an Event inside the block
    that holds the lock the Event's setter needs)."""
    data, pids = _dump("held_wait", tmp_path, ["catalogue"])
    catalogue = pids["catalogue"]
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert verdict["kind"] == "local_deadlock" and verdict["suspects"] == [catalogue], verdict
    assert summary.startswith(f"A lock held across a wait in PID {catalogue} (python): "
                              "thread loader waits in Event.wait (threading.py:"), summary
    assert "at Catalogue.load (notify_jobs.py:" in summary, summary
    assert "inside a block that holds self.mu, and 3 threads wait for that lock" in summary
    assert "Catalogue.publish (notify_jobs.py:" in summary, summary
    assert "lock-order inversion" not in summary, summary


@pytest.mark.extended
def test_shards_waiting_for_the_next_request_of_an_idle_front_end_are_idle(
        tmp_path: Path) -> None:
    """Real report: benfred/py-spy#221 (an idle server's workers all "stuck" in recv): each shard
    accepted the front end's connection on its own listening socket and waits for its next
    request, over TCP and over a Unix socket; the front end waits for clients."""
    # The default 2 s window: socketserver polls every 0.5 s, which a shorter one cannot tell
    # from one slow call.
    data, pids = _dump("served_idle", tmp_path, ["front", "shard-u", "shard-t"],
                       ("--samples", "2"))
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", verdict
    assert verdict["suspects"] == [], verdict
    summary = verdict["summary"]
    for tag in ("front", "shard-u", "shard-t"):
        assert f"PID {pids[tag]} is idle at " in summary, summary


def test_a_queue_join_after_a_worker_died_holding_a_task_names_the_join_and_the_death(
        tmp_path: Path) -> None:
    """Real report: dbt-labs/dbt-core#5602 (a worker thread killed by a BaseException never
    calls task_done(); Queue.join() never returns; the other workers idle in get())."""
    data, pids = _dump("join_dead", tmp_path, ["crawler"])
    crawler = pids["crawler"]
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert verdict["suspects"] == [crawler], verdict
    assert f"Thread MainThread of PID {crawler} (python) waits in Queue.join at join_dead " \
        "(notify_jobs.py:" in summary, summary
    assert "for task_done() of every task taken from the queue" in summary, summary
    assert "its output says thread crawl-" in summary and "died of an exception" in summary
    assert "call task_done() in a finally" in summary, summary


@pytest.mark.extended
def test_a_process_waiting_on_a_lock_held_inside_a_deadlock_is_said_behind_it(
        tmp_path: Path) -> None:
    """Real reports: frappe/frappe#42164 and tox-dev/filelock#115 (a lock holder stuck on its
    child's full pipe; what waits for the lock is where the user looks first)."""
    data, pids = _dump("cycle_behind", tmp_path, ["archiver", "reporter"])
    archiver, reporter = pids["archiver"], pids["reporter"]
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert verdict["kind"] == "deadlock" and verdict["suspects"][0] == archiver, verdict
    assert f"PID {reporter} (python) waits for the FLOCK lock on " in summary, summary
    assert "state.lock at reporter (notify_jobs.py:" in summary, summary
    assert f"held by the launcher (PID {archiver})" in summary, summary


@pytest.mark.extended
@pytest.mark.quiet  # how much CPU the math gets is the assertion: alone, not starved
def test_renamed_torchrun_ranks_keep_their_numbers_and_native_math_is_slow_not_hung(
        tmp_path: Path) -> None:
    """Real report: EleutherAI/bergson#444 (rank 0 eigendecomposes for a long time while the
    others wait in all_reduce), with ranks that set their process title, which erases their
    environment as /proc shows it (so RANK is gone): torchrun starts local ranks in order."""
    ready = tmp_path / "ready"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "3", str(TARGETS / "titled_ranks.py"), str(ready)]
    with running_target(argv, tmp_path, tags=["rank0", "rank1", "rank2"], ready_file=ready,
                        ready=lambda t: all(asleep(t.pids[f"rank{r}"]) for r in (1, 2)),
                        timeout=120) as job:
        data = json.loads(dump_json(job.launcher, "--samples", "2"))
        pids = dict(job.pids)
    ranks = {p["pid"]: p["rank"]["global_rank"] for p in data["processes"]
             if p["role"] == "rank"}
    assert ranks == {pids[f"rank{r}"]: r for r in range(3)}, data["processes"]
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert verdict["suspects"] == [pids["rank0"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Slow, not hung: rank 0 runs on CPU at precondition"), summary
    # The one native sample says where the thread was: nearly always inside eigh's kernels,
    # now and then taking the GIL back on its way out (CI; never "waits for the GIL" then:
    # it is the only Python thread, nothing can hold the GIL against it).
    rank0 = next(p for p in data["processes"] if p["pid"] == pids["rank0"])
    working = next(t for t in rank0["threads"] if t["tid"] == rank0["working_tid"])
    native = [f for f in working["frames"] if f.get("native")]
    if any("libtorch_cpu" in (f.get("file") or "") for f in native):
        assert "it computes inside torch/lib/libtorch_cpu.so under precondition " \
            "(titled_ranks.py:" in summary, summary
    else:
        assert "it computes" in summary and "s of CPU" in summary, summary
    assert "Ranks 1-2 wait in all_reduce" in summary, summary


@pytest.mark.extended
@pytest.mark.quiet  # the workers' sleeps and wake-ups in the window are the assertion
@pytest.mark.parametrize("titles", ["torch", "titled"])
def test_a_loop_waiting_for_its_sleeping_dataloader_workers_is_not_hung(
        tmp_path: Path, titles: str) -> None:
    """Real report: huggingface/lerobot#1488 (a training loop bound by slow DataLoader
    workers): the main process blocks on their pipe between steps while they sleep in their
    dataset's fetch; their own window says they sleep, so nothing is hung. ``titled``: the
    main process is a rank (torchrun's environment) whose workers set their own process
    titles (no ``pt_data_worker`` comm): they are watched as the rank's children, and their
    stacks say what they are."""
    ready = tmp_path / "ready"
    argv = [sys.executable, str(TARGETS / "slow_loader.py"), str(ready), titles]
    env = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1") if titles == "titled" else None
    with running_target(argv, tmp_path, tags=["main"], ready_file=ready, env=env,
                        ready=lambda t: asleep(t.pids["main"]), timeout=60) as job:
        data = json.loads(dump_json(job.launcher, "--samples", "2"))
    verdict = data["verdict"]
    assert verdict["kind"] in ("paused", "progressing"), verdict
    assert verdict["suspects"] == [], verdict


@pytest.mark.extended
def test_a_front_end_its_idle_threads_an_exporter_in_accept_and_a_worker_are_idle(
        tmp_path: Path) -> None:
    """Real report: ml-explore/mlx-lm#674 (an idle model server read as hung): its generation
    thread waits on an empty queue, an exporter child in a plain accept() loop, a worker on its
    task pipe; the front end waits for clients in its select loop."""
    data, pids = _dump("idle_exporter", tmp_path, ["front", "task-worker", "exporter"],
                       ("--samples", "2"))
    verdict = data["verdict"]
    assert verdict["kind"] == "idle" and verdict["suspects"] == [], verdict
    for tag in ("front", "task-worker", "exporter"):
        assert f"PID {pids[tag]} is idle at " in verdict["summary"], verdict


@pytest.mark.extended
def test_an_event_whose_setter_died_is_named_while_an_acceptor_thread_still_blocks(
        tmp_path: Path) -> None:
    """Real report: zellij-org/zellij#5155 (a daemon's main thread waits for a thread that
    died; its acceptor thread, alive in accept(), hides it; clients wait for replies)."""
    data, pids = _dump("dead_setter", tmp_path, ["daemon", "probe"])
    daemon = pids["daemon"]
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert verdict["suspects"] == [daemon], verdict
    assert f"Thread MainThread of PID {daemon} (python) waits in Event.wait at dead_setter " \
        "(notify_jobs.py:" in summary, summary
    assert "(elsewhere: acceptor at " in summary, summary
    assert "its output says thread warm-up" in summary and "died of an exception" in summary
    assert f"PID {pids['probe']} (python) waits for a reply on TCP " in summary, summary
