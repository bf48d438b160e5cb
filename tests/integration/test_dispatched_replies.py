"""A client waits for a reply that a server's handler thread sends, not its reader, on real
processes (tests/targets/dispatch_jobs.py).

GIVEN a session store whose reader thread waits at the head of its loop for the next request
while its two apply threads, which send the replies, deadlock on two locks taken in opposite
orders, and a client waiting for its reply THEN a local deadlock in the store, the client
waiting for it: never "both ends read the same connection" (the reader is not who replies).
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump


def test_a_reply_owed_by_deadlocked_handlers_is_their_deadlock_not_a_framing_bug(
        tmp_path: Path) -> None:
    data, pids = settled_dump(TARGETS / "dispatch_jobs.py", "abba", tmp_path,
                              ["store", "client"])
    verdict = data["verdict"]
    assert verdict["kind"] == "local_deadlock", verdict
    assert "apply-0" in verdict["summary"] and "apply-1" in verdict["summary"], verdict
    assert f"PID {pids['client']} waits" in verdict["summary"], verdict
    assert "both wait to read" not in verdict["summary"], verdict
