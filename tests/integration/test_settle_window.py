"""The window ends early where the job's silence before it covers it (hangscope/live/settle.py).

GIVEN a real process whose one Python thread blocks for good in a wait with no timeout (a pipe
nobody writes) or one whose deadline is minutes away (``Event.wait(600)``: a futex with an
absolute deadline), WHEN the kernel says it has been off CPU longer than the 2 s window and it
is dumped with the defaults, THEN the window ends after about 1 s, the report says why, and the
verdict is the one a dump watching the whole window (``--whole-window``) gives.

What keeps the whole window, each on a real process off CPU as long: a deadline inside the
window (``Event.wait(3)`` in a loop, read when it has 2.5 s behind it), and a process whose
native thread writes while its Python thread waits (faulthandler's watchdog: I/O the window
must see).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import support

JOBS = support.TARGETS / "off_cpu_jobs.py"
WINDOW = 2.0  # the default window
OFF = WINDOW + 0.5  # seconds off CPU before each dump


def _dumps(mode: str, tmp_path: Path, *extras: tuple[str, ...]) -> tuple[list[dict[str, Any]], int]:
    """One default dump per entry of ``extras`` (its extra arguments), each on the job left
    alone again first (a dump's py-spy pause wakes its threads)."""
    workdir = tmp_path / mode
    with support.running_target([sys.executable, str(JOBS), mode, str(workdir / "ready"),
                                 str(workdir)], workdir, tags=["main"]) as job:
        pid = job.pids["main"]
        dumps = []
        for extra in extras:
            support.wait_off_cpu(pid, OFF)
            dumps.append(json.loads(support.dump_json(pid, *extra)))
    return dumps, pid


def _verdict(data: dict[str, Any]) -> tuple[str, list[int]]:
    verdict = data["verdict"]
    return verdict["kind"], sorted(verdict.get("suspects", ()))


def _settled(data: dict[str, Any]) -> bool:
    return any(n.startswith("The window ended after") for n in data["notes"])


@pytest.mark.parametrize("mode", ["pipe", "far"])
def test_a_job_silent_longer_than_the_window_is_not_watched_all_of_it(mode: str,
                                                                    tmp_path: Path) -> None:
    (early, whole), _ = _dumps(mode, tmp_path, (), ("--whole-window",))
    assert 1.0 <= early["window_s"] < WINDOW, early["window_s"]
    assert _settled(early), early["notes"]
    assert whole["window_s"] >= WINDOW and not _settled(whole), whole["notes"]
    assert _verdict(early) == _verdict(whole)


@pytest.mark.parametrize("mode", ["timed", "writer"])
def test_a_timed_wait_or_a_thread_at_work_keeps_the_whole_window(mode: str,
                                                                  tmp_path: Path) -> None:
    (data,), _ = _dumps(mode, tmp_path, ())
    assert data["window_s"] >= WINDOW, data["window_s"]
    assert not _settled(data), data["notes"]
