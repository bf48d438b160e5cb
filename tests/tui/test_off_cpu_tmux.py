"""``hangscope attach`` on a job blocked long before the attach: the stuck column says how long
the thread has really been off CPU, not how long hangscope has watched (issue 20 item 4).

GIVEN a real process whose main thread blocks in a pipe read, WHEN the kernel says it has not
run for ``OFF`` seconds (its /proc sched ``se.exec_start`` unchanged that long) and
``hangscope attach PID`` opens in an 80x24 tmux pane, sampling once (a 1 s window, the next
refresh an hour away), THEN its row's stuck time is at least ``OFF`` seconds on the first
screen, not the 1 s window.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import support
from test_tui_tmux import FIRST_SCREEN_S, tmux_pane, wait_file  # noqa: F401  (a fixture)

OFF = 5.0
STUCK = re.compile(r"≥ (\d+) (s|min|h)")


def test_attach_shows_how_long_the_thread_has_been_off_cpu(
        py_spy: str, tmux_pane, tmp_path: Path) -> None:  # noqa: F811 (the fixture)
    workdir = tmp_path / "job"
    with support.running_target([sys.executable, str(support.TARGETS / "off_cpu_jobs.py"),
                                 "pipe", str(workdir / "ready"), str(workdir)], workdir,
                                tags=["main"]) as job:
        pid = job.pids["main"]
        support.wait_off_cpu(pid, OFF)
        rc_file = tmp_path / "rc"
        command = shlex.join([sys.executable, "-m", "hangscope", "attach", str(pid),
                              "--interval", "3600", "--timeout", "30",
                              "--save-dir", str(tmp_path)])
        env = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
        pane = tmux_pane(f"{env}{command}; echo $? > {shlex.quote(str(rc_file))}")

        def row(screen: str) -> str | None:
            return next((line for line in screen.splitlines()
                         if str(pid) in line and STUCK.search(line)), None)

        screen = pane.wait_for(row, f"PID {pid}'s row with a stuck time", FIRST_SCREEN_S)
        line = row(screen)
        assert line is not None
        found = STUCK.search(line)
        assert found is not None
        seconds = int(found[1]) * {"s": 1, "min": 60, "h": 3600}[found[2]]
        assert seconds >= OFF, f"the stuck column reads {found[0]!r}; the screen:\n{screen}"
        pane.send("q")
        assert wait_file(rc_file, 30) == "0"
