"""A pool emptied by nested checkouts, on a real process (tests/targets/checkout_jobs.py).

Shaped after the connection-pool reports (blind round 11's 08; openmrs-core#6275,
connection_pool#14): each request holds a connection and a helper inside it checks out
another; with as many requests as connections, every one waits for a connection that only a
waiter could give back. Only the source says who holds one (the with-block over
``pool.lease()`` that each holder's line is inside).

GIVEN 3 threads that each hold one of a pool's 3 leases and wait inside the pool for a
second THEN a deadlock of nested checkouts that names the with-block. GIVEN the same but one
holder in a slow fetch THEN no nested-checkout deadlock (that holder will give one back).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "checkout_jobs.py"


def test_threads_that_each_hold_a_lease_and_wait_for_a_second_are_a_deadlock(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "nested", tmp_path, ["cache"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] == [pids["cache"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Deadlock (a pool emptied by nested checkouts): 3 threads"), summary
    assert "each hold one from pool.lease() (held in" in summary, summary
    assert "wait inside it for a second at" in summary and "enrich" in summary, summary


@pytest.mark.extended
def test_a_holder_still_fetching_is_no_nested_checkout_deadlock(tmp_path: Path) -> None:
    data, _ = settled_dump(JOBS, "slow", tmp_path, ["cache"])
    assert "nested checkouts" not in data["verdict"]["summary"], data["verdict"]
