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
import time
from pathlib import Path

import pytest
from support import TARGETS, dump_json, poll, running_target
from targets.hang_shapes import free_port

pytestmark = pytest.mark.frameworks

JOB = TARGETS / "frameworks" / "aiohttp_pool.py"


def _dump(mode: str, tmp_path: Path) -> tuple[dict[str, object], dict[str, int]]:
    workdir = tmp_path / mode
    port = free_port()
    argv = [sys.executable, str(JOB), mode, str(workdir / "ready"), str(port)]
    with running_target(argv, workdir, tags=["server", "client"], timeout=90) as job:
        if mode == "gather":
            # The hang is in place once the two bodies stopped moving: on a loaded machine
            # they were still filling the socket buffers when the window began (it read
            # "progressing": data went through at the window's start).
            _wait_queues_still(job.pids["server"], port)
        verdict: dict[str, object] = json.loads(dump_json(job.launcher))["verdict"]
        return verdict, dict(job.pids)


def _send_queues(pid: int, port: int) -> tuple[int, ...]:
    """The bytes queued to send on each established TCP connection from ``port`` (the kernel's
    /proc/PID/net/tcp ``tx_queue``), in the file's order."""
    rows = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    return tuple(int(cols[4].split(":")[0], 16) for cols in map(str.split, rows)
                 if cols[3] == "01" and int(cols[1].split(":")[1], 16) == port)


def _wait_queues_still(pid: int, port: int, seconds: float = 0.5) -> None:
    """Wait until two connections from ``port`` hold bytes to send and no queue changed for
    ``seconds``: the peer reads none and the server adds none."""
    seen: list[tuple[tuple[int, ...], float]] = []

    def still() -> bool:
        queues, now = _send_queues(pid, port), time.monotonic()
        if len([q for q in queues if q]) < 2 or not seen or seen[-1][0] != queues:
            seen.append((queues, now))
            return False
        return now - seen[-1][1] >= seconds

    poll(still, f"the send queues of PID {pid}'s port {port} to stay full", 60, interval=0.1)


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
