"""An SGLang-shaped offline engine whose synchronous ``generate`` runs each call under
``asyncio.run`` (tests/targets/frameworks/zmq_offline.py; sglang#1606, blind round 44's 01).

GIVEN a receive task started once, on the first call's loop, which ``asyncio.run`` closed
THEN the second call's reply sits unread in a zmq socket no task receives from (its mailbox's
eventfd holds the signal nobody took): "A reply that never comes", the front end the suspect,
the per-call loop named (it read "Idle, not hung"). GIVEN the twin that keeps one loop THEN
progressing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_verdict

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_offline.py"


def test_a_receive_task_left_on_a_closed_loop_leaves_the_reply_unread(tmp_path: Path) -> None:
    got = job_verdict("per_call", tmp_path, ["forwarded"], JOBS)
    verdict = got.verdict
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"][0] == got.launcher, verdict
    summary = verdict["summary"]
    assert summary.startswith(f"A reply that never comes: PID {got.launcher} (python) waits for "
                              "replies at Engine.generate (zmq_offline.py:"), summary
    assert "the reply sent back to it sits unread" in summary, summary
    assert "Its loop runs under asyncio.run, called from Engine.generate" in summary, summary


def test_an_engine_that_keeps_one_loop_progresses(tmp_path: Path) -> None:
    got = job_verdict("one_loop", tmp_path, ["front"], JOBS)
    assert got.verdict["kind"] == "progressing", (got.verdict, got.text)
