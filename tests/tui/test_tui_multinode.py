"""The live view over several nodes, on the real merged dump of the namespace cluster's hung job.

tests/fixtures/multinode/gloo3x2-node0N.json: ranks 0-1 on node01, 2-3 on node02, 4-5 on node03,
rank 5 in all_gather. PIDs repeat: 11 is every node's launcher, 13 and 14 are ranks 2-3 on node02
and ranks 4-5 on node03. The view keys rows by (host, PID) and shows a node column.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from replay import ReplaySampler
from support import until
from textual.pilot import Pilot

from hangscope.analyze.merge import merge
from hangscope.model import Snapshot
from hangscope.model.serialize import load
from hangscope.tui.app import HangscopeApp, make_app
from hangscope.tui.diffview import DiffView
from hangscope.tui.history import History
from hangscope.tui.ranks import RankTable, row_cells, table_columns
from hangscope.tui.screens import DiffPickScreen, FilterScreen
from hangscope.tui.stackview import StackPane

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "multinode"
SIZE = (120, 40)


@pytest.fixture(scope="module")
def merged() -> Snapshot:
    return merge([load(FIXTURES / f"gloo3x2-node0{n}.json") for n in (1, 2, 3)])


def screen_text(app: HangscopeApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def table(app: HangscopeApp) -> RankTable:
    return app.main.query_one(RankTable)


def stack(app: HangscopeApp) -> StackPane:
    return app.main.query_one(StackPane)


async def opened(pilot: Pilot, rows: int) -> None:
    app = pilot.app
    assert isinstance(app, HangscopeApp)
    await until(pilot, lambda: app.raw is not None and table(app).row_count == rows,
                f"{rows} rows in the rank table")


def in_view(snap: Snapshot, body: Callable[[HangscopeApp, Pilot], Awaitable[None]]) -> None:
    """Open the live view on ``snap`` (all 9 rows drawn), then run ``body`` in it."""

    async def scenario() -> None:
        app = make_app(ReplaySampler([snap]), interval=3600.0, clock=lambda: 1000.0)
        async with app.run_test(size=SIZE) as pilot:
            await opened(pilot, 9)
            await body(app, pilot)

    asyncio.run(scenario())


def test_rows_are_keyed_by_host_and_pid_and_only_rank_5_is_red(merged) -> None:
    columns = table_columns(merged)
    assert columns[:3] == ("rank", "node", "role")
    styles = {(p.host, p.pid): row_cells(p, merged, {}, columns)[0].style
              for p in merged.processes}
    assert len(styles) == 9  # no two rows share a key although PIDs 11, 13, 14 repeat
    assert [k for k, style in styles.items() if style == "bold red"] == [("node03", 14)]
    node = columns.index("node")
    rank3 = merged.process(14, "node02")
    assert rank3 is not None and row_cells(rank3, merged, {}, columns)[node].plain == "node02"


def test_history_keeps_one_entry_per_node_for_a_repeated_pid(merged) -> None:
    history = History()
    shown = history.update(merged, 100.0)
    assert shown.processes == merged.processes
    assert {("node02", 14), ("node03", 14), ("node01", 11), ("node03", 11)} <= set(
        history.stuck_for)
    assert len(history.stuck_for) == 9


def test_the_view_opens_on_rank_5_of_node03_and_tells_pid_14s_apart(merged) -> None:
    async def body(app: HangscopeApp, pilot: Pilot) -> None:
        assert stack(app).key == ("node03", 14)  # the suspect, on its node
        await until(pilot, lambda: "log_metrics" in screen_text(app), "rank 5's stack")
        # The stack pane can paint before the table: wait for the table's header too (a
        # loaded machine showed the one without the other).
        await until(pilot, lambda: any(re.match(r"^\s*rank\s+node\s+role\s+pid\s", line)
                                       for line in screen_text(app).splitlines()),
                    "the process table's header")
        lines = screen_text(app).splitlines()
        rows = [m.groups() for line in lines
                if (m := re.match(r"^\s*(\d)\s+(node0\d)\s+rank\s+(\d+)\s", line))]
        assert rows == [("0", "node01", "15"), ("1", "node01", "16"), ("2", "node02", "13"),
                        ("3", "node02", "14"), ("4", "node03", "13"), ("5", "node03", "14")]
        # Up to rank 3 (PID 14 on node02): its own stack, not rank 5's.
        keys = table(app).shown_keys
        target = keys.index(("node02", 14))
        for _ in range(keys.index(("node03", 14)) - target):
            await pilot.press("up")
        await until(pilot, lambda: stack(app).key == ("node02", 14), "rank 3 selected")
        facts = str(stack(app).query_one("#stack").render())
        assert "exchange_gradients" in facts and "log_metrics" not in facts

    in_view(merged, body)


@pytest.mark.extended
def test_filter_by_node_from_the_picker_and_by_typing(merged) -> None:
    async def body(app: HangscopeApp, pilot: Pilot) -> None:
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen), "the filter")
        await pilot.press(*"node02", "down", "enter")  # the picker's "node node02" entry
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        await until(pilot, lambda: "filter: node node02 (3 processes)" in screen_text(app),
                    "the node filter note")
        assert table(app).shown_keys == [("node02", 11), ("node02", 13), ("node02", 14)]

        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen), "the filter")
        await pilot.press("ctrl+a", "ctrl+k", *"node03 all_gather", "enter")  # typed text
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        await until(pilot, lambda: table(app).shown_keys == [("node03", 14)],
                    "rank 5 alone")

        await pilot.press("escape")
        await opened(pilot, 9)

    in_view(merged, body)


def test_diff_picker_offers_the_same_pid_on_another_node(merged) -> None:
    async def body(app: HangscopeApp, pilot: Pilot) -> None:
        assert table(app).selected_key == ("node03", 14)
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DiffPickScreen), "the picker")
        picker = app.screen
        assert isinstance(picker, DiffPickScreen)
        keys = [p.key for p in picker.candidates]
        assert ("node02", 14) in keys and ("node03", 14) not in keys
        await until(pilot, lambda: "PID 14 on node02" in screen_text(app), "node names")
        rank3 = keys.index(("node02", 14))
        while picker.query_one("#diff-choices").highlighted != rank3:
            await pilot.press("down" if picker.query_one("#diff-choices").highlighted
                              < rank3 else "up")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        diff = app.main.query_one(DiffView)
        assert diff.pair == (("node03", 14), ("node02", 14))
        await until(pilot, lambda: "all_gather" in screen_text(app)
                    and "all_reduce" in screen_text(app), "the two stacks' fork")

    in_view(merged, body)
