"""A client that cannot leave ``asyncio.run`` (tests/targets/frameworks/zmq_exit.py,
vLLM-shaped: an offline client and its engine over pyzmq; blind round 38's 07).

GIVEN an output handler that left a blocking zmq receive in the loop's default executor when
it was cancelled THEN a wait chain from asyncio.run's shutdown joining that thread, through
the engine waiting for input, back to the client, saying the join never returns and how to
end such a thread (it ended "the request's coroutine is suspended on an await that nothing
will complete"). GIVEN the handler on a zmq.asyncio socket THEN not that: the client left
asyncio.run and sleeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, verdict_job, wait_off_cpu

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "zmq_exit.py"
TAGS = ["engine", "client"]


def _verdict(mode: str, tmp_path: Path) -> dict[str, object]:
    with verdict_job(mode, tmp_path, TAGS, jobs=JOBS) as job:
        wait_off_cpu(job.pids["client"], 0.5)  # past its ready line: in the join, or asleep
        return json.loads(dump_json(job.launcher))["verdict"]


def test_given_asyncio_run_joining_an_executor_thread_left_in_a_receive_then_named(
        tmp_path: Path) -> None:
    verdict = _verdict("executor_recv", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    summary = str(verdict["summary"])
    assert "(_do_shutdown)" in summary and "joins thread asyncio_" in summary, summary
    assert "waits for a message its peer will never send" in summary, summary
    assert "so the join never returns" in summary, summary
    assert "suspended on an await" not in summary, summary


def test_given_the_handler_on_an_asyncio_socket_then_the_client_leaves(tmp_path: Path) -> None:
    verdict = _verdict("async_socket", tmp_path)
    assert "the join never returns" not in str(verdict["summary"]), verdict
    assert verdict["kind"] != "deadlock", verdict
