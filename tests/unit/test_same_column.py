"""The ``same`` column: how long a process's stack has stayed the same, from the evidence.

A rank spinning in one loop line gives three identical stack samples, yet the progress
watcher (py-spy record at 100 Hz) saw its lines move: its stack did not stay the same, and
the column must not read like its waiting peers' ``≥ 2 s``. Real capture: a gloo job whose
rank 20986 spins while ranks 20985 and 20987 wait in all_reduce (tests/fixtures/healthy).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.model.serialize import load
from hangscope.render.markdown import render_markdown
from hangscope.render.text import measured_moving, stuck_cell
from hangscope.tui.history import History

SPIN = Path(__file__).parents[1] / "fixtures" / "healthy" / "spin.dump.json"


def test_a_rank_whose_lines_moved_reads_moving_though_its_samples_match() -> None:
    snap = load(SPIN)
    by_pid = {p.pid: p for p in snap.processes}
    spinner, waiter = by_pid[20986], by_pid[20985]
    assert spinner.working_thread is not None and spinner.working_thread.stuck  # the trap
    moving = measured_moving(snap)
    assert stuck_cell(spinner, snap, moving) == "moving"
    assert stuck_cell(waiter, snap, moving) == "≥ 2 s"


def test_markdown_and_the_tui_say_the_same() -> None:
    snap = load(SPIN)
    rows = {line.split(" | ")[1]: line for line in render_markdown(snap).splitlines()
            if line.startswith("| ") and " | rank | " in line}
    assert "| moving |" in rows["20986"]
    assert "| ≥ 2 s |" in rows["20985"]
    history = History()
    history.update(snap, now=100.0)
    spinner = next(p for p in snap.processes if p.pid == 20986)
    waiter = next(p for p in snap.processes if p.pid == 20985)
    assert history.stuck_for[spinner.key] is None
    assert history.stuck_for[waiter.key] == snap.window_s
