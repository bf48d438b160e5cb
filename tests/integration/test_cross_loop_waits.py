"""An event loop blocked on a coroutine it sent to another loop that waits for it, on a real
process (tests/targets/sideloop_jobs.py).

GIVEN a gateway whose main asyncio loop, inside a coroutine, blocks in
``run_coroutine_threadsafe(...).result()`` on a side loop whose coroutine awaits a config the
main loop would publish THEN a deadlock of the main loop with itself: the main thread is the
suspect, its call site and the idle side loop's thread named.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump


def test_a_loop_blocked_on_a_side_loop_that_awaits_it_waits_for_itself(tmp_path: Path) -> None:
    data, pids = settled_dump(TARGETS / "sideloop_jobs.py", "blocked", tmp_path, ["gateway"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert "waits for itself" in verdict["summary"] and "auth-loop" in verdict["summary"]
    assert "Gateway.startup (sideloop_jobs.py:" in verdict["summary"], verdict
    assert verdict["suspects"] == [pids["gateway"]], verdict
