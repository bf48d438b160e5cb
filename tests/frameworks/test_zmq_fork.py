"""pyzmq sockets on a context inherited across fork (tests/targets/frameworks/zmq_fork.py).

GIVEN a forked engine core whose sockets are on the context its front end made at import
(pyzmq#1049; blind round 32's 04) THEN a wait chain naming the engine, which runs no zmq I/O
thread, its sockets never connecting, and the front end waiting for what it would send (it
read "unknown": both blocked on IPC). GIVEN the engine on a context of its own, its front end
serving HTTP THEN idle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, asleep, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_fork.py"


def _dump(mode: str, tmp_path: Path) -> tuple[dict, dict[str, int], str]:
    with verdict_job(mode, tmp_path, ["frontend", "engine"], timeout=60, jobs=JOBS) as job:
        pids = dict(job.pids)
        poll(lambda: asleep(pids["engine"]), "the engine waiting for requests", 30)
        raw = dump_json(pids["frontend"])
    return json.loads(raw), pids, show_text(raw, tmp_path)


def test_an_engine_on_a_context_it_inherited_across_fork_is_named(tmp_path: Path) -> None:
    data, pids, text = _dump("inherited", tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["engine"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Sockets of a zmq context inherited across fork: PID "
                              f"{pids['engine']} (python) waits for a zmq message at "
                              "engine_core (zmq_fork.py:"), summary
    assert "created before it forked it: it runs no zmq I/O thread" in summary, summary
    assert f"PID {pids['frontend']} (python) waits at front_end (zmq_fork.py:" in summary, (
        summary)


def test_an_engine_on_a_context_of_its_own_is_not_that(tmp_path: Path) -> None:
    data, _pids, text = _dump("fresh", tmp_path)
    assert "inherited across fork" not in data["verdict"]["summary"], text
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)
