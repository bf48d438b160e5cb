"""A client whose connection waits in a Unix socket's accept queue, on real processes
(tests/targets/accept_jobs.py).

Shaped after the "engine core waits for its loader, whose connection the core never accepted"
reports (blind round 11's 04; hotcell#20, sm#698): no process holds the server end of a
connection that sits in the listener's accept queue, so only the kernel's pending list
(sock_diag UNIX_DIAG_ICONS, as ``ss -x`` reads it) ties the client to the listener.

GIVEN a router waiting for its child before it accepts, and the child waiting for the router's
greeting THEN a deadlock that says the router has not even accepted the connection. GIVEN the
same cycle over an accepted connection THEN the deadlock, without the accept queue.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TARGETS, settled_dump

JOBS = TARGETS / "accept_jobs.py"


def test_a_child_in_the_accept_queue_of_a_router_that_waits_for_it_is_a_deadlock(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "backlog", tmp_path, ["router", "feeder"])
    router, feeder = pids["router"], pids["feeder"]
    pending = [e for e in data["wait_graph"]["edges"]
               if e["pid"] == feeder and e["kind"] == "unix"]
    assert pending and pending[0]["to_pid"] == router, data["wait_graph"]
    assert "accept queue of the Unix socket listening on" in pending[0]["how"], pending
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) <= {router, feeder} and verdict["suspects"], verdict
    summary = verdict["summary"]
    assert f"(PID {router}), which has not even accepted that connection" in summary, summary
    assert "accept and serve connections on their own thread" in summary, summary


@pytest.mark.extended
def test_the_same_cycle_over_an_accepted_connection_says_no_accept_queue(
        tmp_path: Path) -> None:
    data, pids = settled_dump(JOBS, "accepted", tmp_path, ["router", "feeder"])
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert "accept queue" not in verdict["summary"], verdict
    assert pids["router"] in verdict["suspects"] or pids["feeder"] in verdict["suspects"]
