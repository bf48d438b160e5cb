"""The ``same`` column counts from when the thread really stopped, not from the dump (issue 20
item 4): a job blocked for minutes must not read "≥ 0 s" because the dump's window is 0.5 s.

GIVEN a real process whose main thread blocks for good (a pipe nobody writes, a lock its
holder takes again), WHEN the kernel says that thread has not run for ``OFF`` seconds (its
/proc sched ``se.exec_start`` unchanged that long, polled from the test) and it is dumped with
a 0.5 s window, THEN the JSON's ``off_cpu_s`` and the text and Markdown ``same`` column say at
least ``OFF`` seconds, more than the window.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import support

OFF = 3.0  # seconds off CPU before the dump; the window is 0.5 s
JOBS = support.TARGETS / "off_cpu_jobs.py"


def same_seconds(cell: str) -> int:
    """``≥ 4 s`` -> 4, ``≥ 2 min`` -> 120; fails on anything else (``moving``, ``-``)."""
    found = re.fullmatch(r"≥ (\d+) (s|min|h)", cell.strip())
    assert found, f"not a stuck time: {cell!r}"
    return int(found[1]) * {"s": 1, "min": 60, "h": 3600}[found[2]]


@pytest.mark.parametrize("mode", ["pipe", pytest.param("lock", marks=pytest.mark.extended)])
def test_same_column_says_how_long_the_thread_has_been_off_cpu(mode: str,
                                                              tmp_path: Path) -> None:
    workdir = tmp_path / mode
    with support.running_target([sys.executable, str(JOBS), mode, str(workdir / "ready"),
                                 str(workdir)], workdir, tags=["main"]) as job:
        pid = job.pids["main"]
        # Each dump's py-spy pause wakes the thread: wait again before the next one.
        support.wait_off_cpu(pid, OFF)
        data = json.loads(support.dump_json(pid, *support.FAST_WINDOW))
        support.wait_off_cpu(pid, OFF)
        text = support.run_cli("dump", str(pid), *support.FAST_WINDOW,
                               env={"COLUMNS": "200"})
        support.wait_off_cpu(pid, OFF)
        md = support.run_cli("dump", str(pid), *support.FAST_WINDOW, "--format", "md")
    assert text.returncode == 0, text.stderr
    table = text.stdout.split("\nProcesses\n", 1)[1].splitlines()
    assert table[0].split()[-2:] == ["same", "site"], table[0]
    row = next(line for line in table if f" {pid} " in line)
    cell = re.search(r"  (≥ \d+ (?:s|min|h)|moving)  ", row)
    assert cell, row
    assert same_seconds(cell[1]) >= OFF > data["window_s"], row

    assert data["window_s"] < 1.0
    proc = next(p for p in data["processes"] if p["pid"] == pid)
    main = next(t for t in proc["threads"] if t["tid"] == pid)
    assert main["off_cpu_s"] is not None and main["off_cpu_s"] >= OFF, main
    assert main["unchanged_samples"] == main["samples"] == 2

    assert md.returncode == 0, md.stderr
    lines = md.stdout.splitlines()
    header = next(line for line in lines if " same " in line and line.startswith("|"))
    row = next(line for line in lines if line.startswith("|") and f" {pid} " in line
               and line.count("|") == header.count("|"))
    column = [c.strip() for c in header.split("|")].index("same")
    assert same_seconds(row.split("|")[column]) >= OFF, row


def test_one_reading_of_each_cpu_clock_serves_every_read_of_a_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN a real thread blocked in a pipe, read twice in a row (as a round reads each rank
    in turn), THEN the second read moves onto no CPU (the first one's clock readings serve it),
    and neither says more than the thread can have been off CPU: a reused clock understates.
    Past ``CPU_CLOCK_TTL_S`` the clocks are read again."""
    import os
    import time

    from hangscope.collect import procfs

    moves: list[object] = []
    real = os.sched_setaffinity

    def counted(pid: int, cpus: object) -> None:
        moves.append(cpus)
        real(pid, cpus)  # type: ignore[arg-type]

    ttl = procfs.CPU_CLOCK_TTL_S
    started = time.monotonic()
    workdir = tmp_path / "pipe"
    with support.running_target([sys.executable, str(JOBS), "pipe", str(workdir / "ready"),
                                 str(workdir)], workdir, tags=["main"]) as job:
        pid = job.pids["main"]
        support.wait_off_cpu(pid, 1.0)
        monkeypatch.setattr(procfs, "_clocks", {})
        monkeypatch.setattr(os, "sched_setaffinity", counted)
        first = procfs.read_off_cpu(pid)
        moved = len(moves)
        second = procfs.read_off_cpu(pid)
        assert moved >= 2 and len(moves) == moved, moves  # a move there and the mask back
        monkeypatch.setattr(procfs, "CPU_CLOCK_TTL_S", 0.0)
        third = procfs.read_off_cpu(pid)
        assert len(moves) > moved
        bound = time.monotonic() - started
    for read in (first, second, third):
        assert 1.0 - ttl <= read[pid] <= bound, (read, bound)
