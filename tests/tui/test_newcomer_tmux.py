"""The TUI keys a newcomer reaches for (issue 20), in a real 80x24 tmux pane.

GIVEN a saved dump opened with ``hangscope show FILE --tui`` in tmux, WHEN keys are sent with
``send-keys``, THEN ``capture-pane`` shows what each key promises. The tmux server is private
to the test and killed at teardown (the ``tmux_pane`` fixture of test_tui_tmux.py).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest
import support
from test_tui_tmux import FIRST_SCREEN_S, tmux_pane, wait_file  # noqa: F401  (a fixture)

FINDING = "Expected 4 ranks"  # on the Findings tab of the mismatch dump only


@pytest.mark.extended
def test_tab_keys_work_from_the_stack_tabs_panes_and_h_opens_help(
        tmux_pane, tmp_path: Path) -> None:  # noqa: F811 (the fixture)
    rc_file = tmp_path / "rc"
    command = shlex.join([sys.executable, "-m", "hangscope", "show",
                          str(support.SNAPSHOTS / "mismatch.json"), "--tui"])
    env = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
    pane = tmux_pane(f"{env}{command}; echo $? > {shlex.quote(str(rc_file))}")
    pane.wait_text("MISMATCHED COLLECTIVES", FIRST_SCREEN_S)
    # WHEN the focus is in the Stack tab's thread list, then in its stack pane
    pane.send("Enter")
    for _ in ("thread list", "stack pane"):
        pane.send("Tab")
        time.sleep(0.5)  # a person's pace: the focus move is handled before the next key
        # THEN 4 opens the Findings tab and 1 brings the Stack tab back, from there too
        pane.send("4")
        pane.wait_text(FINDING)
        pane.send("1")
        pane.wait_gone(FINDING)
    # h (as in less and htop) opens the help, with what the table's marks mean
    pane.send("h")
    pane.wait_text("hangscope attach: keys")
    pane.send("End")  # the help scrolls: at 80x24 the legend is below the keys
    text = pane.wait_text("the suspect: the verdict names this rank")
    assert "In the rank table" in text and "how long the rank's stack" in text
    pane.send("Escape")
    pane.wait_gone("the suspect: the verdict names this rank")
    pane.send("q")
    try:
        assert wait_file(rc_file, 30) == "0"
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the screen:\n{pane.screen()}") from None


def test_diff_picker_stops_at_its_last_entry(tmux_pane, tmp_path: Path) -> None:  # noqa: F811
    command = shlex.join([sys.executable, "-m", "hangscope", "show",
                          str(support.SNAPSHOTS / "mismatch.json"), "--tui"])
    env = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
    pane = tmux_pane(f"{env}{command}")
    pane.wait_text("MISMATCHED COLLECTIVES", FIRST_SCREEN_S)
    # WHEN the diff picker is open and Down is pressed more times than it has entries
    pane.send("d")
    pane.wait_text("with:")
    for _ in range(9):  # 3 entries: wrapping round 3 times would land on the first again
        pane.send("Down")
        time.sleep(0.1)
    pane.send("Enter")
    # THEN the last entry is the one picked (the cursor stopped there, it did not wrap round
    # to the first): the mismatch dump's picker for rank 3 ends with rank 2
    pane.wait_text("vs  rank 2 (PID")


def test_stack_pane_at_80x24_shows_the_users_own_line(
        tmux_pane, tmp_path: Path) -> None:  # noqa: F811 (the fixture)
    command = shlex.join([sys.executable, "-m", "hangscope", "show",
                          str(support.SNAPSHOTS / "mismatch.json"), "--tui"])
    env = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
    pane = tmux_pane(f"{env}{command}")
    # WHEN the TUI opens at 80x24 on the suspect, whose stack starts with 10 native and
    # torch.distributed lines
    pane.wait_text("MISMATCHED COLLECTIVES", FIRST_SCREEN_S)
    # THEN the stack pane shows the user's own line (the banner and the table only cut it)
    pane.wait_text("gather_metrics (mismatch.py:68)")
    # and the next rank's too, once it is selected
    pane.send("Up")
    pane.wait_text("sync_gradients (mismatch.py:57)")


def test_threads_of_one_name_show_their_tids(tmux_pane, tmp_path: Path) -> None:  # noqa: F811
    # GIVEN a process with two threads named "worker", one asleep and one waiting on a lock
    target_dir = tmp_path / "job"
    with support.running_target([sys.executable, str(support.TARGETS / "named_threads.py"),
                                 str(target_dir / "ready"), str(target_dir)], target_dir,
                                tags=["main"]) as job:
        tids = [line.split()[0] for line in job.ready_file.read_text().splitlines()
                if line.endswith(" worker")]
        dump = tmp_path / "dump.json"
        result = support.run_cli("dump", str(job.pids["main"]), "--format", "json",
                                 "-o", str(dump), "--window", "0.5", "--samples", "2",
                                 timeout=120)
        assert result.returncode == 0, result.stderr
    command = shlex.join([sys.executable, "-m", "hangscope", "show", str(dump), "--tui"])
    env = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
    pane = tmux_pane(f"{env}{command}")
    pane.wait_text(" 1 Stack", FIRST_SCREEN_S)
    # THEN the thread list tells the two apart by TID
    for tid in tids:
        pane.wait_text(f"worker {tid}")


def test_frames_not_shown_in_the_diff_have_a_key(tmux_pane, tmp_path: Path) -> None:  # noqa: F811
    command = shlex.join([sys.executable, "-m", "hangscope", "show",
                          str(support.SNAPSHOTS / "mismatch.json"), "--tui"])
    env = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
    pane = tmux_pane(f"{env}{command}")
    pane.wait_text("MISMATCHED COLLECTIVES", FIRST_SCREEN_S)
    # WHEN rank 3 is diffed with rank 0: they share more frames than the diff shows
    pane.send("d")
    pane.wait_text("with:")
    pane.send("Enter")
    # THEN the count says which key shows them, and the key does
    pane.wait_text("not shown; a: show them")
    pane.send("a")
    text = pane.wait_gone("not shown")
    assert "_run_module_as_main" in text, text


def test_toasts_stay_off_the_stack_and_keep_file_names_whole(
        tmux_pane, tmp_path: Path) -> None:  # noqa: F811 (the fixture)
    command = shlex.join([sys.executable, "-m", "hangscope", "show",
                          str(support.SNAPSHOTS / "mismatch.json"), "--tui"])
    env = f"PYTHONPATH={shlex.quote(support.cli_env().get('PYTHONPATH', ''))} "
    pane = tmux_pane(f"cd {shlex.quote(str(tmp_path))} && {env}{command}")
    pane.wait_text("MISMATCHED COLLECTIVES", FIRST_SCREEN_S)
    # WHEN a key answers with a toast
    pane.send("n")
    text = pane.wait_text("Native frames hidden.")
    # THEN it is in the header's rows, not over the stack pane below the tabs
    rows = text.splitlines()
    at = next(i for i, row in enumerate(rows) if "Native frames hidden." in row)
    tabs = next(i for i, row in enumerate(rows) if "1 Stack" in row)
    assert at < tabs, text
    # and a saved report's paths are each on one line, whole
    pane.send("s")
    text = pane.wait_text("Report saved")
    saved = sorted(p.name for p in tmp_path.glob("hangscope-*"))
    assert len(saved) == 2, saved
    for name in saved:
        assert any(row.rstrip().endswith(name) for row in text.splitlines()), text
