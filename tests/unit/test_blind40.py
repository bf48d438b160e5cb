"""Blind round 40's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 40).

GIVEN Ray Data's streaming_split with one consumer stopped early (its peer waits for the epoch
the split coordinator cannot start) THEN no local deadlock in the coordinator's process: its
two threads "waiting on locks" were Ray's C++ executor threads (registered with Python, no
Python frame) idle in their condition wait (it read "Local deadlock in PID ...: 2 threads
wait on locks that the others hold (Dummy-3 at ?, Dummy-1 at ?)").
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.rules import lock_threads
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_native_pools_idle_threads_then_no_local_deadlock() -> None:
    snap = analyze(load(FIXTURES / "ray_data_split_one_rank_stopped.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is not VerdictKind.LOCAL_DEADLOCK, verdict
    coordinator = next(p for p in snap.processes
                       if (p.title or "").startswith("ray::SplitCoordinator"))
    idle = [t for t in coordinator.threads if t.name in ("Dummy-1", "Dummy-3")]
    assert len(idle) == 2 and all(t.python and all(f.native for f in t.frames) for t in idle)
    assert lock_threads(coordinator) == []
    assert verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects, verdict


def test_given_a_reply_no_task_receives_beside_a_timed_poll_then_the_unread_reply() -> None:
    """Blind round 40's 08 (sglang#19475): ``/get_server_info`` never starts the front end's
    receive loop; the scheduler idles in ``poller.poll(1000)``: that timed poll and the
    detokenizer's receive read as a deadlock of zmq receives. A ring member in a timed poll
    waits for nobody: the front end's unread reply is the verdict."""
    snap = analyze(load(FIXTURES / "sglang_info_probe_reply_unread_polled.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (snap.job.target,), verdict
    assert "no task of its event loop receives from its zmq sockets" in verdict.summary
    assert "Deadlock" not in verdict.summary
