"""A service out of file descriptors (tests/targets/fdleak_jobs.py, on a real redis-server).

GIVEN an asyncio service at ``ulimit -n 64`` that leaked one redis connection per request
(redis closed them: CLOSE_WAIT) and now retries its redis connect on EMFILE while the load
driver waits for its answer, THEN the verdict says it is out of file descriptors, at its
limit, names the CLOSE_WAIT connections to redis's port as a leak and quotes its EMFILE line,
with the service as the suspect: never "progressing" because its retry loop moves.
"""

from __future__ import annotations

import json
from pathlib import Path

from support import TARGETS, dump_json, verdict_job

JOBS = TARGETS / "fdleak_jobs.py"


def test_given_a_service_that_leaked_its_fds_then_out_of_file_descriptors(
        tmp_path: Path) -> None:
    with verdict_job("leak", tmp_path, ["service", "driver"], jobs=JOBS) as job:
        data = json.loads(dump_json(job.pids["driver"], "--samples", "2", "--window", "1"))
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert summary.startswith(f"Out of file descriptors: PID {job.pids['service']}"), summary
    assert "at its limit of 64 (RLIMIT_NOFILE" in summary, summary
    assert "TCP connections in CLOSE_WAIT to 127.0.0.1:" in summary, summary
    assert "Too many open files" in summary, summary
    assert verdict["suspects"] == [job.pids["service"]], verdict
    service = next(p for p in data["processes"] if p["pid"] == job.pids["service"])
    assert service["fd_limit"] == 64, service
