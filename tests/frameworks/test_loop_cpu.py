"""An async endpoint that runs a regular expression synchronously on uvicorn's event loop
(tests/targets/frameworks/loop_cpu.py; blind round 42's 01, vllm#54678).

GIVEN a match that backtracks for days on the loop's thread while a client waits for its reply
THEN "Event loop blocked on CPU": the server the suspect, the endpoint's call named, the client
waiting on it (it read the client waiting, or the server "spinning" beside a chain).
GIVEN matches of ~60 ms each, one request after another THEN progressing: the loop serves the
next request between them (each sample may catch the same line; the window sees it leave).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_verdict

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "loop_cpu.py"
TAGS = ["server", "parsing", "client"]


def test_a_regex_backtracking_on_the_loop_blocks_the_server(tmp_path: Path) -> None:
    got = job_verdict("backtrack", tmp_path, TAGS, JOBS)
    verdict, text, pids = got.verdict, got.text, got.pids
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["server"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Event loop blocked on CPU: The asyncio event loop of PID "
                              f"{pids['server']} (python) (thread MainThread) has run one "
                              "synchronous call, server.<locals>.parse (loop_cpu.py:"), summary
    assert f"PID {pids['client']} (python) waits on it" in summary, summary


def test_a_loop_busy_with_one_match_after_another_progresses(tmp_path: Path) -> None:
    got = job_verdict("steady", tmp_path, TAGS, JOBS)
    assert got.verdict["kind"] == "progressing", (got.verdict, got.text)
