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

import support
from test_tui_tmux import FIRST_SCREEN_S, tmux_pane, wait_file  # noqa: F401  (a fixture)

FINDING = "Expected 4 ranks"  # on the Findings tab of the mismatch dump only


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
