"""gRPC call credentials whose plugin refreshes its token (tests/targets/frameworks/
grpc_token.py; blind round 36's 02, grpc#22471).

GIVEN a metadata plugin that refreshes its token over the very channel it authenticates,
inside its lock THEN a deadlock in the client: the refresh call waits for its metadata from a
second plugin thread, which waits for the lock the first holds (it read "waits on another
process (IPC)"); the client the suspect, the advice to refresh over a channel without those
credentials. GIVEN the refresh over a channel of its own THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, job_dump, show_text

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "grpc_token.py"
TAGS = ["server", "client"]


def test_a_token_refresh_over_its_own_credentialed_channel_is_a_deadlock_in_the_client(
        tmp_path: Path) -> None:
    data, pids = job_dump("same_channel", tmp_path, TAGS, JOBS, window=())
    client, text = pids["client"], show_text(json.dumps(data), tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert verdict["suspects"] == [client], verdict
    summary = verdict["summary"]
    assert "waits on its call's metadata, from the call credentials' plugin at " \
        "TokenSource.token (grpc_token.py:" in summary, summary
    assert "waits for self._lock (taken at TokenSource.token (grpc_token.py:" in summary
    assert "Refresh over a channel without those call credentials" in summary, summary


def test_a_token_refresh_over_a_channel_of_its_own_progresses(tmp_path: Path) -> None:
    data, _ = job_dump("own_channel", tmp_path, TAGS, JOBS, window=())
    text = show_text(json.dumps(data), tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)
