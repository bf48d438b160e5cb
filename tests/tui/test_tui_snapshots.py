"""SVG snapshots of the TUI at 80x24 and 160x50, on Snapshots recorded from the demos.

The clock is frozen and the interval is an hour, so every run draws the same screen. After an
intended change to the look: ``pytest tests/test_tui_snapshots.py --snapshot-update``, then
read the new SVGs in tests/__snapshots__/ before committing them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import support
from replay import ReplaySampler
from support import until
from textual.pilot import Pilot

from hangscope.errors import ProcessNotFound
from hangscope.model import Snapshot
from hangscope.model.serialize import load
from hangscope.tui.app import HangscopeApp, make_app

FIXTURES = support.SNAPSHOTS
SMALL, LARGE = (80, 24), (160, 50)


def recorded(name: str) -> Snapshot:
    return load(FIXTURES / f"{name}.json")


def frozen_clock() -> float:
    return 1000.0


def live(items: Sequence[Snapshot | BaseException]) -> HangscopeApp:
    return make_app(ReplaySampler(items), interval=3600, clock=frozen_clock)


def wait_for(condition: Callable[[HangscopeApp], bool]) -> Callable[[Pilot], object]:
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        assert isinstance(app, HangscopeApp)
        await until(pilot, lambda: condition(app), "the app to get there")
        await pilot.pause()

    return run_before


sampled = wait_for(lambda app: app.raw is not None and not app.sampling)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x50"])
def test_mismatch(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(live([recorded("mismatch")]), terminal_size=size, run_before=sampled)


def test_mismatch_diff(snap_compare) -> None:
    assert snap_compare(live([recorded("mismatch")]), terminal_size=SMALL, run_before=sampled,
                        press=["d", "enter"])


def test_sglang_call_tree(snap_compare) -> None:
    assert snap_compare(live([recorded("sglang")]), terminal_size=LARGE, run_before=sampled,
                        press=["2"])


def test_straggler_findings(snap_compare) -> None:
    assert snap_compare(live([recorded("straggler")]), terminal_size=SMALL, run_before=sampled,
                        press=["4"])


def test_job_exited(snap_compare) -> None:
    app = live([recorded("mismatch"), ProcessNotFound("No process with PID 7698 exists.")])

    async def run_before(pilot: Pilot) -> None:
        await sampled(pilot)  # type: ignore[misc]
        await pilot.press("r")
        await wait_for(lambda app: app.exited)(pilot)  # type: ignore[misc]

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_no_color(snap_compare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")  # read when the app is made
    assert snap_compare(live([recorded("mismatch")]), terminal_size=SMALL, run_before=sampled)
