"""An aiohttp WebSocket hub (``web.run_app``) and its subscribers, idle between alerts
(tests/targets/frameworks/aiohttp_ws.py; blind round 33's 02).

GIVEN every loop idle, the hub's connections its subscribers' WebSockets THEN no hang: it
read "a reply that never comes", the hub blamed (``run_app`` runs the server's loop through
``run_until_complete``, taken for the program's own call awaiting a result). The open
WebSockets leave idle unproven where the upgrade's answer fell in the request's kernel tick:
unknown, never hung.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, asleep, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "aiohttp_ws.py"
TAGS = ["hub", "subscriber0", "subscriber1"]


def test_an_idle_websocket_hub_is_not_called_hung(tmp_path: Path) -> None:
    with verdict_job("idle", tmp_path, TAGS, timeout=60, jobs=JOBS) as job:
        pids = dict(job.pids)
        poll(lambda: all(asleep(pids[t]) for t in TAGS), "the hub and subscribers idle", 30)
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] in ("idle", "unknown"), (verdict, text)
    assert verdict["suspects"] == [], verdict
    assert "A reply that never comes" not in verdict["summary"], verdict["summary"]
