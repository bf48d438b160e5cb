"""A child stopped by terminal job control, on real processes on a pty
(tests/targets/terminal_stop_jobs.py).

Shaped after the "subprocess prompt hangs when started in a new process group" reports
(cpython's job-control notes on SIGTTIN; blind round 10's pty installer): a child started with
``process_group=0`` reads its terminal from a background group and the kernel stops it.

GIVEN an installer on a pty waiting for a migrator that read its terminal from its own
process group THEN a wait chain to the stopped migrator: suspected, its state T, SIGTTIN and
the two process groups said, ``kill -CONT`` given. GIVEN the migrator in the foreground group,
at its prompt THEN it is not called stopped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, asleep, dump_json, running_target

JOBS = TARGETS / "terminal_stop_jobs.py"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def _dump(mode: str, tmp_path: Path, migrator_state: str) -> tuple[dict, dict[str, int]]:
    workdir = tmp_path / f"job-{mode}"
    with running_target([sys.executable, str(JOBS), mode, str(workdir / "ready"),
                         str(workdir)], workdir, tags=["runner", "installer", "migrator"],
                        timeout=60, ready=lambda t: asleep(t.pids["runner"])
                        and asleep(t.pids["installer"])
                        and _state(t.pids["migrator"]) == migrator_state) as job:
        return json.loads(dump_json(job.launcher, "--samples", "2", "--window", "0.5")), \
            dict(job.pids)


def test_a_child_stopped_by_sigttin_is_the_suspect_and_the_stop_is_explained(
        tmp_path: Path) -> None:
    data, pids = _dump("background", tmp_path, "T")
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert f"PID {pids['migrator']} (migrator) is stopped (state T)" in summary, summary
    assert "terminal job control stopped it" in summary and "SIGTTIN" in summary, summary
    assert f"kill -CONT {pids['migrator']}" in summary, summary
    assert verdict["suspects"] == [pids["migrator"]], verdict


@pytest.mark.extended
def test_a_child_at_its_prompt_in_the_foreground_is_not_called_stopped(tmp_path: Path) -> None:
    data, _ = _dump("foreground", tmp_path, "S")
    assert "is stopped" not in data["verdict"]["summary"], data["verdict"]
