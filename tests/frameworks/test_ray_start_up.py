"""A Ray driver waiting on an actor whose worker is still starting up
(tests/targets/frameworks/ray_start_up.py).

Until Ray retitles a worker ``ray::Class``, its title is its command line, ``python
.../default_worker.py --raylet-name=/tmp/ray/.../sockets/raylet ...``: it read as the raylet (a
helper, never watched), so a driver waiting on an actor whose start-up imports for a while
read "hung" (CI, 2026-12-07: a Ray Data pool's next map actor importing pydantic).

GIVEN a driver waiting on an actor whose module's import computes THEN the job progresses, the
starting worker's lines being what moves. GIVEN a driver holding the lock the actor's import
waits for THEN it is hung, and the starting worker is no helper: its lock wait is in the
evidence.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import RAY_GROUP, TARGETS, dump_json, running_target

pytestmark = [pytest.mark.frameworks, pytest.mark.xdist_group(RAY_GROUP)]

JOB = TARGETS / "frameworks" / "ray_start_up.py"


def _verdict(mode: str, tmp_path: Path) -> tuple[dict[str, object], dict[str, int]]:
    workdir = tmp_path / mode
    argv = [sys.executable, str(JOB), mode, str(workdir / "ready"), str(workdir)]
    with running_target(argv, workdir, tags=["driver", "worker"], timeout=120,
                        env={"RAY_USAGE_STATS_ENABLED": "0"}) as job:
        return json.loads(dump_json(job.launcher))["verdict"], dict(job.pids)


def test_a_driver_waiting_on_an_actor_whose_import_computes_progresses(
        tmp_path: Path) -> None:
    verdict, pids = _verdict("import_slow", tmp_path)
    assert verdict["kind"] == "progressing", verdict
    assert f"PID {pids['worker']}" in str(verdict["summary"]), verdict


def test_workers_computing_before_ray_retitles_them_progress(tmp_path: Path) -> None:
    """The workers' site hook runs before Ray's title: their command line names the raylet's
    socket (``--raylet-name``), and they are no raylet."""
    verdict, _ = _verdict("site_slow", tmp_path)
    assert verdict["kind"] == "progressing", verdict
    workers = [line.split()[0] for line in (tmp_path / "site_slow" / "ready").read_text(
    ).splitlines() if line.endswith(" worker")]  # each worker Ray started computes
    assert any(f"PID {pid}" in str(verdict["summary"]) for pid in workers), verdict


def test_a_driver_holding_the_lock_its_actors_import_waits_for_is_hung(
        tmp_path: Path) -> None:
    verdict, pids = _verdict("import_locked", tmp_path)
    assert verdict["kind"] not in ("progressing", "idle"), verdict
    assert pids["worker"] in verdict["suspects"] or pids["driver"] in verdict["suspects"], \
        verdict
