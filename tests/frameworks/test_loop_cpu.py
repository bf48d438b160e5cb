"""An async endpoint that runs a regular expression synchronously on uvicorn's event loop
(tests/targets/frameworks/loop_cpu.py; blind round 42's 01, vllm#54678).

GIVEN a match that backtracks for days on the loop's thread while a client waits for its reply
THEN "Event loop blocked on CPU": the server the suspect, the endpoint's call named, the client
waiting on it (it read the client waiting, or the server "spinning" beside a chain).
GIVEN matches of ~60 ms each, one request after another THEN progressing: the loop serves the
next request between them (each sample may catch the same line; the window sees it leave).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "loop_cpu.py"
TAGS = ["server", "parsing", "client"]


def test_a_regex_backtracking_on_the_loop_blocks_the_server(tmp_path: Path) -> None:
    with verdict_job("backtrack", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
        pids = dict(job.pids)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["server"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Event loop blocked on CPU: The asyncio event loop of PID "
                              f"{pids['server']} (python) (thread MainThread) has run one "
                              "synchronous call, server.<locals>.parse (loop_cpu.py:"), summary
    assert f"PID {pids['client']} (python) waits on it" in summary, summary


def test_a_loop_busy_with_one_match_after_another_progresses(tmp_path: Path) -> None:
    with verdict_job("steady", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)
