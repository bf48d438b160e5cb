"""A thread left behind by fork, on real processes (tests/targets/fork_notifier_jobs.py).

Shaped after cpython#84559 (threads do not survive fork) and the multiprocessing "fork with
threads" reports: an object that owns a thread is made, then the process forks; the children
wait on the object's Event for a thread that runs in the parent only.

GIVEN two ``os.fork()`` children whose only thread waits in a client's ``flush()`` for the
sender thread the parent started THEN a wait nobody can end: both children suspected, the
thread that would wake them named in the parent, and the fix (make it after the fork, or
spawn). GIVEN the same client restarted in each child by ``os.register_at_fork`` THEN no
such verdict: every flush returns.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "fork_notifier_jobs.py"


def test_children_waiting_for_a_thread_fork_did_not_copy_are_the_suspects(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "stranded", tmp_path, ["parent", "child0", "child1"])
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A wait nobody can end"), summary
    assert "runs only in their parent" in summary and "telemetry-sender" in summary, summary
    assert "Telemetry._drain" in summary and "fork copies only the thread" in summary, summary
    assert sorted(verdict["suspects"]) == sorted([pids["child0"], pids["child1"]]), verdict


def test_children_waiting_on_a_future_of_a_loop_fork_did_not_copy_are_the_suspects(
        tmp_path: Path) -> None:
    """The object's thread runs asyncio's loop, not a method of its own class: the children
    wait in ``Future.result`` for a coroutine only the parent's loop thread would run."""
    data, pids = settled_dump(JOBS, "loop", tmp_path, ["parent", "child0", "child1"])
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith("A wait nobody can end"), summary
    assert "wait in Future.result at Fetcher.get (fork_notifier_jobs.py:" in summary, summary
    assert "fetch-loop at BaseEventLoop.run_forever" in summary, summary
    assert "runs only in their parent" in summary and "fork copies only the thread" in summary
    assert sorted(verdict["suspects"]) == sorted([pids["child0"], pids["child1"]]), verdict


@pytest.mark.extended
def test_a_client_restarted_in_each_child_is_not_stranded(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "restarted", tmp_path, ["parent", "child0", "child1"])
    assert "fork copies only" not in data["verdict"]["summary"], data["verdict"]
    assert not data["verdict"].get("suspects"), data["verdict"]
