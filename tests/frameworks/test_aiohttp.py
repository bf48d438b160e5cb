"""An aiohttp client and a FastAPI app under uvicorn, real libraries and real sockets
(tests/targets/frameworks/aiohttp_pool.py).

GIVEN ``asyncio.gather`` of 3 ``session.get`` through ``TCPConnector(limit=2)``, the bodies read
only after the gather (aiohttp#1623, blind round 30's 03) THEN a wait chain from the server,
waiting for room to send on connections the client's loop no longer reads, to the client, the
suspect (it read "unknown": both processes idle in epoll). GIVEN the twin that reads its
downloads slowly, chunk by chunk, while the server waits for room THEN no hang and nobody
blamed: a reader whose loop still wakes may read between its timers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target
from targets.hang_shapes import free_port

pytestmark = pytest.mark.frameworks

JOB = TARGETS / "frameworks" / "aiohttp_pool.py"


def _dump(mode: str, tmp_path: Path) -> tuple[dict[str, object], dict[str, int]]:
    workdir = tmp_path / mode
    argv = [sys.executable, str(JOB), mode, str(workdir / "ready"), str(free_port())]
    with running_target(argv, workdir, tags=["server", "client"], timeout=90) as job:
        verdict: dict[str, object] = json.loads(dump_json(job.launcher))["verdict"]
        return verdict, dict(job.pids)


def test_a_client_holding_every_pooled_connection_unread_is_the_suspect(
        tmp_path: Path) -> None:
    verdict, pids = _dump("gather", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["client"]], verdict
    summary = str(verdict["summary"])
    assert f"PID {pids['server']} (python) waits to send on TCP 127.0.0.1:" in summary, summary
    assert f"to PID {pids['client']} (python), which stopped reading it" in summary, summary


def test_a_client_reading_its_downloads_slowly_is_not_a_hang(tmp_path: Path) -> None:
    """Progressing where the window sampled its loop in asyncio's transport callbacks (the
    bytes moving); where it caught none (a 64 KiB read takes well under a millisecond of each
    20 ms), "unknown": /proc/PID/io counts no recv and no send. Never a hang with a suspect:
    a reader whose loop wakes in the window may read between its timers."""
    verdict, _pids = _dump("slow", tmp_path)
    assert verdict["kind"] in ("progressing", "unknown"), verdict
    assert verdict["suspects"] == [], verdict
