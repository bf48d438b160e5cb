"""Locks and threads get the right suspect (issue 17): ABBA, self-waits, dead producers,
locks inherited locked across fork.

GIVEN a real job of tests/targets/lock_jobs.py, hung the way a real report describes (each test
cites it), WHEN ``hangscope dump PID --format json`` reads it, THEN the verdict names the
mechanism, the suspect and the lock sites. No rule reads these jobs' names: the sentences quote
them only because they are the jobs' own frames and locks.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from support import TARGETS, dump_json, verdict_job

JOBS = TARGETS / "lock_jobs.py"
FAST = ("--samples", "2", "--window", "0.5")


def _dump(mode: str, tmp_path: Path, tags: list[str],
          signal_tag: str | None = None) -> tuple[dict[str, Any], dict[str, int]]:
    with verdict_job(mode, tmp_path, tags, jobs=JOBS) as job:
        if signal_tag is not None:  # the handler runs on the thread the signal interrupts
            os.kill(job.pids[tags[0]], signal.SIGUSR2)
            job.wait_for([signal_tag], 30.0)
        data = json.loads(dump_json(job.launcher, *FAST))
        pids = dict(job.pids)
    return data, pids


@pytest.mark.extended
def test_two_threads_taking_two_locks_in_opposite_orders_are_the_suspect_cycle(
        tmp_path: Path) -> None:
    """Real report: stripe-archive/sequins#90 (thread 1 holds A and wants B, thread 2 holds B
    and wants A), here behind a client waiting on the server's Unix socket."""
    data, pids = _dump("abba_store", tmp_path, ["server", "client"])
    server, client = pids["server"], pids["client"]
    verdict = data["verdict"]
    assert verdict["kind"] == "local_deadlock", verdict
    assert verdict["suspects"] == [server], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"Local deadlock in PID {server}: 2 threads wait on locks that "
                              "the others hold ("), summary
    assert ("writer at RecordStore.write (lock_jobs.py:"
            f"{_line('with self.journal_lock:', _line('def write('))}), holding "
            "self.index_lock and taking self.journal_lock") in summary, summary
    assert ("compactor at RecordStore.compact (lock_jobs.py:"
            f"{_line('with self.index_lock:', _line('def compact('))}), holding "
            "self.journal_lock and taking self.index_lock") in summary, summary
    assert "; 2 more threads wait behind them" in summary, summary
    assert f"PID {client} waits" in summary and "for it" in summary, summary
    # The readers queue on the writer: victims, never named as the holder.
    assert "reader-" not in summary, summary
    assert any(e["kind"] == "py_lock" and e["pid"] == server
               for e in data["wait_graph"]["edges"]), data["wait_graph"]


def _line(text: str, after: int = 0) -> int:
    lines = JOBS.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if i > after and text in line)


@pytest.mark.extended
def test_a_signal_handler_taking_the_lock_its_interrupted_frame_holds_deadlocks_itself(
        tmp_path: Path) -> None:
    """Real report: quodeq/quodeq#785 (the SIGTERM handler blocks on the non-reentrant lock the
    interrupted frame holds)."""
    data, pids = _dump("handler_lock", tmp_path, ["main"], signal_tag="handler")
    main = pids["main"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [main], verdict
    summary = verdict["summary"]
    assert "deadlocks itself: it waits for _BUFFER_LOCK at flush_buffer (lock_jobs.py:" in summary
    assert "its own outer frame collect_lines (lock_jobs.py:" in summary, summary
    assert "whose line does not call it: a signal handler" in summary, summary
    assert any(e["kind"] == "py_lock" and e["pid"] == main and e["to_tid"] == e["tid"]
               for e in data["wait_graph"]["edges"]), data["wait_graph"]


@pytest.mark.extended
def test_a_queue_whose_producer_thread_died_is_a_wait_nobody_can_end(tmp_path: Path) -> None:
    """Real report: tilezen/tilequeue#131 (a background thread's exception leaves the main
    thread waiting forever)."""
    data, pids = _dump("dead_producer", tmp_path, ["consumer"])
    consumer = pids["consumer"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [consumer], verdict
    summary = verdict["summary"]
    assert "waits in Queue.get at dead_producer (lock_jobs.py:" in summary, summary
    assert "no other thread of it is left: the producer is gone" in summary, summary
    assert "thread shard-producer died of an exception" in summary, summary


@pytest.mark.extended
def test_a_forked_child_with_a_feeder_thread_waits_on_a_lock_inherited_locked(
        tmp_path: Path) -> None:
    """Real report: pytorch/pytorch#130610 (workers forked while a lock is held block on it
    forever); the child here has a queue feeder thread besides."""
    data, pids = _dump("fork_feeder", tmp_path, ["parent", "child"])
    parent, child = pids["parent"], pids["child"]
    proc = next(p for p in data["processes"] if p["pid"] == child)
    assert len([t for t in proc["threads"] if t["python"]]) >= 2, proc["threads"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [child], verdict
    summary = verdict["summary"]
    assert (f"forked from the launcher (PID {parent}) without exec, waits on the lock "
            "_REGISTRY_LOCK at child_main (lock_jobs.py:") in summary, summary
    assert "inherited locked across fork" in summary, summary
    assert "only helper threads besides" in summary, summary


@pytest.mark.extended
def test_an_event_loop_blocking_on_a_future_of_its_own_loop_waits_for_itself(
        tmp_path: Path) -> None:
    """Real report: empicano/aiomqtt#174 (run_coroutine_threadsafe(...).result() on the loop's
    own thread); the loop's default executor has an idle worker, which cannot help."""
    data, pids = _dump("loop_callback", tmp_path, ["loop"])
    loop = pids["loop"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [loop], verdict
    summary = verdict["summary"]
    assert "waits for itself: it blocks synchronously in concurrent.futures.Future.result() " \
           "at on_tick (lock_jobs.py:" in summary, summary
    assert "run_coroutine_threadsafe" in summary, summary


@pytest.mark.extended
def test_a_request_awaiting_a_future_whose_setter_task_died_is_named_on_an_idle_loop(
        tmp_path: Path) -> None:
    """Real report: vllm-project/vllm#36941 (the output handler task dies silently; every
    request waits on a future nobody sets while the loop idles in epoll)."""
    data, pids = _dump("lost_future", tmp_path, ["server", "client"])
    server, client = pids["server"], pids["client"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [server], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"Wait chain: PID {client} (python) waits for a reply on TCP"), \
        summary
    assert (f"the asyncio loop of PID {server} (python) is idle, not blocked: the request's "
            "coroutine is suspended on an await that nothing will complete") in summary, summary


def test_a_pool_task_waiting_on_a_task_of_its_own_full_pool_waits_for_itself(
        tmp_path: Path) -> None:
    """Real report: python/cpython#121075 family (a task blocks on a future of its own
    executor, whose only worker is the one running it)."""
    data, pids = _dump("pool_self", tmp_path, ["pool"])
    pool = pids["pool"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pool], verdict
    summary = verdict["summary"]
    assert ("a ThreadPoolExecutor worker, waits in Future.result at checksum (lock_jobs.py:"
            in summary), summary
    assert "queued behind the one this worker runs (it waits for itself)" in summary, summary
