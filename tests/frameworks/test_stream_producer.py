"""A streamed response whose generation thread died (tests/targets/frameworks/
stream_producer.py; blind round 43's 01, transformers PR #22576).

GIVEN a FastAPI endpoint streaming what a generation thread puts on a queue, the thread dead
of an exception before its first token THEN "a wait nobody can end": AnyIO's worker thread in
the iterator's queue get, the producer's death from the log, the client behind it (it read
"idle, not hung": the server had spoken last on the connection, its headers). GIVEN a live
producer, one token every 0.2 s THEN progressing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, job_verdict

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "stream_producer.py"
TAGS = ["server", "client"]


def test_a_stream_whose_producer_thread_died_is_a_wait_nobody_ends(tmp_path: Path) -> None:
    got = job_verdict("died", tmp_path, TAGS, JOBS)
    verdict, text, pids = got.verdict, got.text, got.pids
    assert verdict["kind"] == "wait_chain", (verdict, text)
    assert verdict["suspects"] == [pids["server"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("A wait nobody can end: Thread AnyIO worker thread of PID "
                              f"{pids['server']} (python) waits in Queue.get at "
                              "Streamer.__next__ (stream_producer.py:"), summary
    assert "its output says thread generate died of an exception" in summary, summary
    assert f"PID {pids['client']} (python) waits for a reply" in summary, summary


def test_a_stream_whose_producer_lives_progresses(tmp_path: Path) -> None:
    got = job_verdict("slow", tmp_path, TAGS, JOBS)
    assert got.verdict["kind"] == "progressing", (got.verdict, got.text)
