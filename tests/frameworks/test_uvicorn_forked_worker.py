"""A FastAPI lifespan that forks its batch worker under uvicorn and stops it with
``terminate()`` and ``join()`` (tests/targets/frameworks/uvicorn_forked_worker.py;
Kludex/uvicorn#2289, blind round 36's 08).

GIVEN the worker forked while uvicorn's signal handlers are installed, and a restart's SIGTERM
THEN a deadlock whose suspect is the worker: it catches SIGTERM (the handler it inherited),
so terminate() did not end it, and it waits for the job queue its parent writes while the
parent waits in join() (it read the service the suspect, with advice to read the child's
output). GIVEN the worker started with the spawn context THEN the restart ends it and the
next service idles with its own worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "uvicorn_forked_worker.py"


def test_a_forked_worker_that_caught_the_restarts_sigterm_is_the_suspect(
        tmp_path: Path) -> None:
    with verdict_job("fork", tmp_path, ["service", "worker", "stopping"], timeout=60,
                     jobs=JOBS) as job:
        raw = dump_json(job.launcher)
        worker, service = job.pids["worker"], job.pids["service"]
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", (verdict, text)
    assert verdict["suspects"] == [worker] != [service], verdict
    summary = verdict["summary"]
    assert f"PID {worker} (python) catches SIGTERM (a handler: SigCgt in /proc status), so " \
        "terminate() does not end it" in summary, summary
    assert "tell it to stop before waiting" in summary, summary
    assert "read the child's output" not in summary, summary
    caught = next(p["signals_caught"] for p in data["processes"] if p["pid"] == worker)
    assert caught == ["SIGTERM"], caught


def test_a_spawned_worker_ends_at_the_restart_and_the_next_service_idles(
        tmp_path: Path) -> None:
    with verdict_job("spawn", tmp_path, ["restarted"], timeout=60, jobs=JOBS) as job:
        raw = dump_json(job.launcher)
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "idle", (data["verdict"], text)
    assert data["verdict"]["suspects"] == [], data["verdict"]
