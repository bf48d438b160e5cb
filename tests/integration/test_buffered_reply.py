"""A reply that sits in a worker's stdout buffer, on a real job (tests/targets/router_jobs.py).

GIVEN a router waiting in select() for a worker's reply, and the worker, started without -u,
back at the head of its ``for line in sys.stdin:`` loop after print()ing it (deno#22767's
shape), THEN the verdict is a deadlock whose suspect is that worker and whose advice is to
flush (or run with -u): not a prompt, not the router.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump

JOBS = TARGETS / "router_jobs.py"


def test_a_worker_whose_reply_sits_in_its_stdout_buffer_is_the_suspect(tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "buffered", tmp_path, ["router", "worker0", "worker1"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [pids["worker1"]], verdict
    assert "flush=True" in verdict["summary"] and "prompt" not in verdict["summary"], verdict
