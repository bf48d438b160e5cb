"""A server's own poll loop over its listening socket is idle, on real processes
(tests/targets/poll_server_jobs.py).

GIVEN a relay whose own ``select.poll()`` loop (no framework on the stack) waits on its
listening TCP socket and its workers' socketpairs, and workers reading their socketpair in a
``for`` loop, with no client THEN the job is idle: the kernel says the poll set holds a socket
with no connection, a listener, so what it waits for is a client: work.
"""

from __future__ import annotations

from pathlib import Path

from support import TARGETS, settled_dump


def test_a_server_polling_its_listening_socket_in_its_own_loop_is_idle(tmp_path: Path) -> None:
    data, pids = settled_dump(TARGETS / "poll_server_jobs.py", "idle", tmp_path,
                              ["relay", "worker"])
    verdict = data["verdict"]
    assert verdict["kind"] == "idle" and verdict["suspects"] == [], verdict
    assert f"PID {pids['relay']} is idle at main" in verdict["summary"], verdict
