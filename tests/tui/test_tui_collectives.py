"""The TUI shows the collective evidence: each rank's position as a column of the rank table,
and the per-communicator view on ``c`` (Pilot, a real dump of the gloo Flight Recorder job)."""

from __future__ import annotations

from support import FIXTURES
from test_tui import first_sample, hides, live, row_of, run_async, screen_text, shows

from hangscope.model.serialize import load
from hangscope.tui.collectives import CollectivesScreen
from hangscope.tui.screens import KEYS

DUMP = FIXTURES / "nccl" / "gloo_mismatch.dump.json"


@run_async
async def test_rank_positions_in_the_table_and_the_communicator_view_on_c() -> None:
    snap = load(DUMP)
    app = live([snap])
    async with app.run_test(size=(160, 40)) as pilot:
        await first_sample(pilot)
        text = screen_text(app)
        assert " coll " in text.splitlines()[next(
            i for i, line in enumerate(text.splitlines()) if " pid " in line)]
        assert "#2 all_reduce" in row_of(text, 6352)
        assert "#2 all_gather" in row_of(text, 6353)
        await pilot.press("c")
        assert isinstance(app.screen, CollectivesScreen)
        await shows(pilot, "process group 0 (Flight Recorder) · 2 ranks",
                    "first disagreement at #2 (op)", "#2 all_gather scheduled (done #1)")
        await pilot.press("escape")
        await hides(pilot, "first disagreement at #2 (op)")
        assert not isinstance(app.screen, CollectivesScreen)


@run_async
async def test_a_dump_without_evidence_says_so_in_the_view() -> None:
    app = live([load(FIXTURES / "snapshots" / "mismatch.json")])
    async with app.run_test(size=(100, 30)) as pilot:
        await first_sample(pilot)
        assert " coll " not in screen_text(app)  # no evidence: no column
        await pilot.press("c")
        await shows(pilot, "No collective evidence in this snapshot")


def test_the_key_is_in_the_help() -> None:
    assert any(key == "c" and "collectives" in what for key, what in KEYS)
