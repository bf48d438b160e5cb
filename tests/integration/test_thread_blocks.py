"""Threads blocked by threads: a pool's ABBA, a logging lock held over a full stderr pipe, the
GIL held over a blocking native read.

GIVEN a real job of tests/targets/thread_jobs.py, hung the way a real report describes (each
test cites it), WHEN ``hangscope dump PID --format json`` reads it, THEN the verdict names the
mechanism and its suspects. No rule reads these jobs' names: the sentences quote them only
because they are the jobs' own threads, frames and locks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import TARGETS, dump_json, verdict_job, wait_off_cpu

JOBS = TARGETS / "thread_jobs.py"
FAST = ("--samples", "2", "--window", "0.5")


def _dump(mode: str, tmp_path: Path, tags: list[str],
          settled: str | None = None) -> tuple[dict[str, Any], dict[str, int]]:
    """The job's dump, once ``settled``'s main thread (a tag) has been off CPU for 1 s: its
    ready line comes just before its final wait, which a loaded machine may not reach soon."""
    with verdict_job(mode, tmp_path, tags, jobs=JOBS) as job:
        if settled is not None:
            wait_off_cpu(job.pids[settled], 1.0)
        data = json.loads(dump_json(job.launcher, *FAST))
        pids = dict(job.pids)
    return data, pids


def test_two_pool_workers_taking_two_locks_in_opposite_orders_deadlock_the_pool(
        tmp_path: Path) -> None:
    """Real report: r-spade/ormah#207 (one path takes L_db then L_mem, a background job L_mem
    then L_db), here both on ThreadPoolExecutor workers, two more tasks queued behind them."""
    data, pids = _dump("pool_abba", tmp_path, ["ledger"])
    ledger = pids["ledger"]
    verdict = data["verdict"]
    assert verdict["kind"] == "local_deadlock", verdict
    assert verdict["suspects"] == [ledger], verdict
    summary = verdict["summary"]
    assert f"Local deadlock in PID {ledger}: 2 threads wait on locks that the others hold (" \
        in summary, summary
    assert "at Ledger.transfer (thread_jobs.py:" in summary, summary
    assert "holding self.accounts_lock and taking self.audit_lock" in summary, summary
    assert "at Ledger.audit (thread_jobs.py:" in summary, summary
    assert "holding self.audit_lock and taking self.accounts_lock" in summary, summary
    assert "; 2 more threads wait behind them" in summary, summary
    # The queued tasks are victims, never named as holders.
    assert "Ledger.balance" not in summary and "Ledger.note" not in summary, summary


@pytest.mark.extended
def test_a_thread_holding_the_logging_lock_over_a_full_stderr_pipe_is_the_cycle(
        tmp_path: Path) -> None:
    """Real report: aethersdr/AetherSDR#2300 (the parent captured stderr and did not drain it;
    the next write blocked under the log handler's mutex, every thread that logged queued)."""
    data, pids = _dump("log_pipe", tmp_path, ["collector", "child"])
    collector, child = pids["collector"], pids["child"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [child, collector], verdict
    summary = verdict["summary"]
    assert summary.startswith("Deadlock: Thread sim-"), summary
    assert f"of PID {child} " in summary and "is blocked writing its stderr (pipe " in summary
    assert "at StreamHandler.emit (logging/__init__.py:" in summary, summary
    assert f"which only PID {collector} " in summary, summary
    assert "wait for self.lock (taken at Handler.acquire (logging/__init__.py:" in summary
    assert "is past self.acquire() and before its release at Handler.handle" in summary
    assert "read every captured pipe" in summary, summary
    assert "Local deadlock" not in summary and "lock-order" not in summary, summary


@pytest.mark.extended
def test_the_gil_held_over_a_native_read_of_a_pipe_only_its_own_thread_writes(
        tmp_path: Path) -> None:
    """Real report: pysam-developers/pysam#57 (native calls that keep the GIL block a thread
    that waits for I/O from another thread of the same process)."""
    data, pids = _dump("gil_pipe", tmp_path, ["parent", "child"], settled="child")
    parent, child = pids["parent"], pids["child"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [child], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"GIL held in a blocking call: Thread MainThread of PID {child}"
                              " ("), summary
    assert "holds the GIL while blocked in read on pipe " in summary, summary
    assert "through ctypes (a ctypes.PyDLL function keeps the GIL" in summary, summary
    assert "and thread pump, the only one that could write that pipe" in summary, summary
    assert "waits for the GIL" in summary, summary
    assert f"PID {parent} (" in summary and "waits for it" in summary, summary
