"""A wait that leads out of the job names the process there (blind round 15's 03 and 04).

GIVEN a real job polling a ``filelock`` that a sidecar holds forever, the sidecar started in a
session of its own (no part of the job's tree), WHEN hangscope dumps the job, THEN the verdict
is a lock wait that names the sidecar's PID, its command line and where it sleeps, says it is
not part of the job, and makes it the suspect. GIVEN a job blocked reading a connection to a
local service that listens and never accepts, THEN the wait-for edge and the verdict name that
service's process instead of a remote address. The healthy twins (the lock is shared and let
go, the service answers) read as no hang. The file-lock cases need the ``filelock`` package,
like the other file-lock tests: extended tier; the TCP cases (stdlib, ~1 s each) run by default.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import FAST_WINDOW, Target, dump_json, running_target

SCRIPT = Path(__file__).resolve().parent.parent / "targets" / "outside_jobs.py"


@contextmanager
def _pair(tmp_path: Path, outside: list[str], job: list[str]) -> Iterator[tuple[Target, Target]]:
    """The outside process (its own session), then the job, both killed on the way out."""
    with running_target([sys.executable, str(SCRIPT), outside[0], outside[1],
                         str(tmp_path / "o" / "ready"), *outside[2:]], tmp_path / "o",
                        tags=["holder" if outside[0] == "holder" else "service"],
                        timeout=30) as other, \
            running_target([sys.executable, str(SCRIPT), job[0], job[1],
                            str(tmp_path / "j" / "ready")], tmp_path / "j", tags=["job"],
                           timeout=30) as target:
        yield other, target


def _dump(tmp_path: Path, outside: list[str], job: list[str]) -> tuple[dict[str, Any], int, int]:
    """One quick dump of the job beside its outside process: (the JSON, its PID, the job's)."""
    with _pair(tmp_path, outside, job) as (other, target):
        data = json.loads(dump_json(target.popen.pid, *FAST_WINDOW))
    return data, other.popen.pid, target.popen.pid


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.extended
def test_given_a_filelock_held_by_a_sidecar_outside_the_job_then_it_is_named(
        tmp_path: Path) -> None:
    lock = str(tmp_path / ".ckpt.lock")
    data, holder, job_pid = _dump(tmp_path, ["holder", lock, "keep"], ["lock_job", lock])
    verdict = data["verdict"]
    assert verdict["kind"] == "lock_wait", verdict
    assert (f"held by PID {holder} (python outside_jobs.py), not part of this job: it sleeps "
            "at holder (outside_jobs.py:") in verdict["summary"], verdict
    assert verdict["suspects"][:2] == [holder, job_pid], verdict
    outside = {o["pid"]: o for o in data["waits"]["outside"]}
    assert outside[holder]["state"] == "S" and outside[holder]["wchan"], outside


@pytest.mark.extended
def test_given_a_filelock_shared_with_a_healthy_neighbour_then_no_lock_wait(
        tmp_path: Path) -> None:
    lock = str(tmp_path / ".ckpt.lock")
    data = _dump(tmp_path, ["holder", lock, "share"], ["lock_job", lock])[0]
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
    assert Path(lock + ".step").read_text() != "1"


def test_given_a_loop_blocked_on_a_local_service_that_never_accepts_then_it_is_named(
        tmp_path: Path) -> None:
    port = str(_free_port())
    data, service, _ = _dump(tmp_path, ["service", port, "backlog"], ["tcp_job", port])
    named = (f"PID {service} (python outside_jobs.py), not part of this job, which listens on "
             f"127.0.0.1:{port} and has not accepted the connection: it sleeps at service "
             "(outside_jobs.py:")
    edges = [e for e in data["wait_graph"]["edges"] if e["kind"] == "tcp"]
    assert edges and named in (edges[0]["outside"] or ""), edges
    assert "(remote)" not in json.dumps(data["verdict"])
    assert {o["pid"]: o["pending"] != [] for o in data["waits"]["outside"]} == {service: True}


def test_given_a_local_service_that_answers_then_no_wait_on_it(tmp_path: Path) -> None:
    port = str(_free_port())
    data = _dump(tmp_path, ["service", port, "answer"], ["tcp_job", port])[0]
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
    assert "not part of this job" not in json.dumps(data["verdict"])
