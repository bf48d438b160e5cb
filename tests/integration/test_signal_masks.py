"""A worker that waits for the SIGTERM its supervisor sent, on real processes
(tests/targets/signal_jobs.py).

Shaped after the graceful-shutdown reports (a worker's SIGTERM handler never runs because the
signal is masked in every thread, or SIGTERM is ignored, and ``terminate(); wait()`` hangs):
the Python stacks show only Event.wait and wait(); /proc/PID/status says the signal is pending
and blocked (ShdPnd, SigBlk), or ignored (SigIgn).

GIVEN SIGTERM pending and blocked by every thread of the worker THEN a signal never delivered,
the worker the suspect, its supervisor's wait said. GIVEN SIGTERM ignored THEN a signal
ignored. GIVEN the mask but nothing sent THEN no signal story.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "signal_jobs.py"


def test_sigterm_pending_and_masked_in_every_thread_is_never_delivered(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "masked", tmp_path, ["worker", "supervisor"])
    worker = next(p for p in data["processes"] if p["pid"] == pids["worker"])
    assert worker["signals_blocked"] == ["SIGTERM"], worker
    verdict = data["verdict"]
    assert verdict["suspects"] == [pids["worker"]], verdict
    summary = verdict["summary"]
    assert summary.startswith(f"A signal never delivered: PID {pids['worker']} (ingest-worker) "
                              "has SIGTERM pending, blocked by every one of its threads"), summary
    assert "signal.pthread_sigmask" in summary, summary
    assert f"waits for its child PID {pids['worker']}" in summary, summary


@pytest.mark.extended
def test_sigterm_ignored_by_a_child_its_parent_waits_for(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "ignored", tmp_path, ["worker", "supervisor"])
    verdict = data["verdict"]
    assert verdict["suspects"] == [pids["worker"]], verdict
    assert verdict["summary"].startswith(
        f"A signal ignored: PID {pids['worker']} (ingest-worker) ignores SIGTERM"), verdict


@pytest.mark.extended
def test_a_masked_signal_never_sent_is_no_signal_story(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "unsent", tmp_path, ["worker", "supervisor"])
    worker = next(p for p in data["processes"] if p["pid"] == pids["worker"])
    assert worker["signals_blocked"] == [], worker
    assert "signal" not in data["verdict"]["summary"].split(":")[0].lower(), data["verdict"]
