"""An aiohttp gateway whose handlers block in the event loop's default executor
(tests/targets/frameworks/aiohttp_executor.py; blind round 43's 05).

GIVEN handlers that each wait in ``run_in_executor(None, ...)`` for a batch an async flusher
posts, two more requests than the executor has threads, and a backend URL that names
``localhost`` THEN aiohttp's resolver's ``getaddrinfo`` is queued on the same executor behind
them: the verdict names the full pool, says it is the loop's default executor and that a
lookup there waits behind the handlers (it said only "a server's pool full of calls", with
gRPC's advice). GIVEN the twin whose URL is an IP address THEN progressing.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, running_target
from targets.hang_shapes import free_port

pytestmark = pytest.mark.frameworks

JOB = TARGETS / "frameworks" / "aiohttp_executor.py"


def _verdict(mode: str, tmp_path: Path) -> tuple[dict[str, object], dict[str, int]]:
    workdir = tmp_path / mode
    argv = [sys.executable, str(JOB), mode, str(workdir / "ready"), str(free_port())]
    with running_target(argv, workdir, tags=["backend", "gateway"], timeout=90) as job:
        verdict: dict[str, object] = json.loads(dump_json(job.launcher))["verdict"]
        return verdict, dict(job.pids)


def test_handlers_filling_the_loops_executor_starve_its_dns_lookup(tmp_path: Path) -> None:
    verdict, pids = _verdict("dns", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["gateway"]], verdict
    summary = str(verdict["summary"])
    assert summary.startswith("A server's pool full of calls that never end: "), summary
    assert "run handlers blocked inside them at MicroBatcher.submit_and_wait " \
        "(aiohttp_executor.py:" in summary, summary
    assert "the event loop's default executor" in summary, summary
    assert "getaddrinfo" in summary and "cpython#112169" in summary, summary
    assert "max_workers" not in summary, summary  # (gRPC's advice)
    assert re.search(r"the last URL its output names, http://localhost:(\d+)/embed, has a host "
                     r"name, and it holds no connection to port \1, where this host listens",
                     summary), summary


def test_handlers_whose_flusher_needs_no_lookup_progress(tmp_path: Path) -> None:
    verdict, _ = _verdict("ip", tmp_path)
    assert verdict["kind"] == "progressing", verdict
