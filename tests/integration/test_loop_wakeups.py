"""An asyncio loop never woken by the thread that completes its futures, on real processes
(tests/targets/loop_wake_jobs.py).

GIVEN an asyncio client whose reply-reader thread completes the loop's future with
``fut.set_result`` (not ``call_soon_threadsafe``) while the loop sleeps in ``epoll_wait`` on
nothing but its self-pipe (cpython#97970) THEN the job is hung, a lost wake-up, the reader
thread suspected and its call named. GIVEN the same latent bug in a client whose loop also
listens for requests nobody sends THEN it is idle (anyone may still wake it), with a warning
that names the call.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump

JOBS = TARGETS / "loop_wake_jobs.py"


def test_a_loop_whose_future_another_thread_completes_directly_is_a_lost_wakeup(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "lost", tmp_path, ["client", "reader", "server"])
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["summary"].startswith("A lost wake-up"), verdict["summary"]
    assert "fut.set_result(reply)" in verdict["summary"], verdict["summary"]
    assert "reply-reader" in verdict["summary"] and "call_soon_threadsafe" in verdict["summary"]
    assert verdict["suspects"] == [pids["client"]], verdict


def test_the_same_bug_in_a_loop_that_listens_for_requests_is_idle(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "serve", tmp_path, ["client"])
    assert data["verdict"]["kind"] == "idle", data["verdict"]
    (warning,) = [f for f in data["findings"] if f["id"] == "loop.unsafe_call"]
    assert warning["evidence"]["pid"] == pids["client"], warning
    assert "fut.set_result(reply)" in warning["message"] and "reply-reader" in warning["message"]
