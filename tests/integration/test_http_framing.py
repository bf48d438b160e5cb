"""An HTTP/1.1 body with no length on a keep-alive connection (tests/targets/http_framing_jobs.py).

GIVEN a client reading a registry's response until EOF while the registry's handler thread
reads the same connection for the next request (cpython#75259; blind round 37's 06, which read
"idle" when the server's answer came a clock tick after the request: an idle front end, no
request open) THEN a deadlock, both ends reading, the framing named. GIVEN the registry sending
a Content-Length THEN not hung.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, job_dump

JOBS = TARGETS / "http_framing_jobs.py"
TAGS = ["server", "client"]


def test_a_client_reading_a_keep_alive_body_without_a_length_is_a_deadlock_with_the_handler(
        tmp_path: Path) -> None:
    data, pids = job_dump("no_length", tmp_path, TAGS, JOBS, window=())
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) == {data["job"]["target"], pids["server"]}, verdict
    summary = verdict["summary"]
    assert "both wait to read the same connection, and neither sends" in summary, summary
    assert "(process_request_thread) of PID " in summary, summary


def test_a_client_given_a_content_length_is_not_hung(tmp_path: Path) -> None:
    verdict = job_dump("with_length", tmp_path, TAGS, JOBS, window=())[0]["verdict"]
    # (each answer read, it asks again a moment later: a poll of a server, not a hang)
    assert verdict["kind"] in ("progressing", "idle") and verdict["suspects"] == [], verdict
