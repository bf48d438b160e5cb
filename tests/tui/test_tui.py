"""The live TUI, driven by Pilot with a sampler that replays Snapshots recorded from the demos.

GIVEN recorded Snapshots (tests/fixtures/snapshots/*.json, real ``hangscope dump`` output of the
demo jobs), WHEN keys are pressed, THEN the screen and the saved files say what they should.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import stat
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path

import pytest
import support
from replay import ReplaySampler
from support import until
from textual.pilot import Pilot
from textual.widgets import OptionList, TabbedContent

from hangscope.errors import PermissionDenied, ProcessNotFound
from hangscope.model import Frame, Gpu, GpuProcessUse, ProcessKey, Role, Snapshot
from hangscope.model.serialize import load
from hangscope.render.output import render
from hangscope.tui.app import HangscopeApp, make_app, report_paths
from hangscope.tui.calltree import CallTree
from hangscope.tui.diffview import diff_stacks
from hangscope.tui.header import LiveState
from hangscope.tui.history import History
from hangscope.tui.ranks import RankTable, fit_site, row_cells, table_columns
from hangscope.tui.screens import KEYS, DiffPickScreen, FilterScreen, HelpScreen
from hangscope.tui.stackview import StackPane
from hangscope.words import at_least, duration_cell

FIXTURES = support.SNAPSHOTS
SIZE = (80, 24)


def run_async(test: Callable[..., Coroutine[object, object, None]]) -> Callable[..., None]:
    """Run an ``async def`` test in a fresh event loop (no pytest-asyncio needed)."""

    @functools.wraps(test)
    def wrapper(*args: object, **kwargs: object) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


def recorded(name: str) -> Snapshot:
    return load(FIXTURES / f"{name}.json")


def key_of(snap: Snapshot, pid: int) -> ProcessKey:
    """(host, PID) of a recorded process: the live view keys its rows and history by it."""
    proc = snap.process(pid)
    assert proc is not None
    return proc.key


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def screen_text(app: HangscopeApp) -> str:
    """What the terminal shows right now, as plain text, one line per row."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text for strip in strips)


def live(snaps: list[Snapshot | BaseException], interval: float = 3600.0, delay: float = 0.0,
         clock: Clock | None = None, save_dir: Path | str = ".") -> HangscopeApp:
    return make_app(ReplaySampler(snaps, delay=delay), interval=interval, save_dir=save_dir,
                    clock=clock or Clock())


async def shows(pilot: Pilot, *needles: str, timeout: float = 10.0) -> str:
    """Wait until every needle is on the screen; return the screen."""
    app = pilot.app
    assert isinstance(app, HangscopeApp)
    await until(pilot, lambda: all(n in screen_text(app) for n in needles),
                f"{needles} on screen", timeout)
    return screen_text(app)


async def hides(pilot: Pilot, *needles: str, timeout: float = 10.0) -> str:
    """Wait until no needle is on the screen; return the screen."""
    app = pilot.app
    assert isinstance(app, HangscopeApp)
    await until(pilot, lambda: not any(n in screen_text(app) for n in needles),
                f"{needles} off screen", timeout)
    return screen_text(app)


async def first_sample(pilot: Pilot) -> None:
    """Wait until the first Snapshot has been taken and drawn."""
    app = pilot.app
    assert isinstance(app, HangscopeApp)
    await until(pilot, lambda: app.raw is not None and not app.sampling, "the first sample")
    assert app.raw is not None
    last = app.raw.processes[-1].pid
    await until(pilot, lambda: any(line.split()[2:3] == [str(last)]
                                   for line in screen_text(app).splitlines()),
                "the rank table")


def row_of(text: str, pid: int) -> str:
    """The rank table's row for ``pid``."""
    return next(line for line in text.splitlines()
                if re.match(rf"^\s+\S+\s+\S+\s+{pid}\s", line))


def table(app: HangscopeApp) -> RankTable:
    return app.main.query_one(RankTable)


def stack(app: HangscopeApp) -> StackPane:
    return app.main.query_one(StackPane)


# -- what the first screen shows --------------------------------------------------------------


@pytest.mark.parametrize(("name", "verdict", "odd"), [
    ("mismatch", "MISMATCHED COLLECTIVES", "all_gather"),
    ("sglang", "MISMATCHED COLLECTIVES", "all_gather"),
    ("straggler", "STRAGGLER", "preprocess_batch"),
    ("deadlock", "LOCAL DEADLOCK", "flush_cache"),
])
@run_async
async def test_first_screen_shows_ranks_verdict_and_the_odd_rank(
        name: str, verdict: str, odd: str) -> None:
    snap = recorded(name)
    app = live([snap])
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        text = await shows(pilot, verdict, odd)
        for proc in snap.processes:
            assert str(proc.pid) in text
        assert odd in text
        suspect = snap.verdict.suspects[0]
        assert table(app).selected_pid == suspect  # the suspect is selected first
        assert "sampled 0s ago" in text
        assert app.state is LiveState.WATCHING
        if name == "mismatch":
            assert "python job · launcher 7698 · vm · ranks 4/4" in text


# -- selecting ---------------------------------------------------------------------------------


@pytest.mark.extended
@run_async
async def test_select_a_rank_and_a_thread() -> None:
    app = live([recorded("mismatch")])
    async with app.run_test(size=(100, 40)) as pilot:
        await first_sample(pilot)
        assert stack(app).pid == 7709
        await pilot.press("up")  # from rank 3 to rank 2
        await until(pilot, lambda: stack(app).pid == 7708, "rank 2 in the stack view")
        await shows(pilot, "rank 2 (PID 7708)", "sync_gradients (mismatch.py:57)")

        app.main.query_one("#threads", OptionList).focus()
        await pilot.press("down")  # MainThread -> gloo_tcp_loop, a native-only thread
        await until(pilot, lambda: stack(app).tid != 7708, "another thread")
        await shows(pilot, "gloo_tcp_loop (", "(no stack: do_epoll_wait)", "11 fds:")

        await pilot.press("enter")  # nothing breaks on enter in the thread list
        app.main.query_one(RankTable).focus()
        await pilot.press("2", "enter")  # enter in the table opens the stack tab
        await until(pilot, lambda: app.main.query_one(TabbedContent).active == "tab-stack",
                    "the stack tab")


@pytest.mark.extended
@run_async
async def test_toggle_native_frames_and_full_paths() -> None:
    app = live([recorded("mismatch")])
    async with app.run_test(size=(100, 40)) as pilot:
        await first_sample(pilot)
        await shows(pilot, "pthread_cond_wait [libc.so.6]")
        await pilot.press("n")
        text = await hides(pilot, "pthread_cond_wait")
        assert "gather_metrics (mismatch.py:68)" in text
        await pilot.press("n")
        await shows(pilot, "pthread_cond_wait [libc.so.6]")

        await pilot.press("p")
        await shows(pilot, "gather_metrics (/work/main/demo/mismatch.py:68)")
        await pilot.press("p")
        await shows(pilot, "gather_metrics (mismatch.py:68)")


@pytest.mark.extended
@run_async
async def test_tabs_by_number_and_the_call_tree() -> None:
    app = live([recorded("sglang")])
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        tabs = app.main.query_one(TabbedContent)
        for key, tab in (("2", "tab-tree"), ("4", "tab-findings"), ("3", "tab-diff"),
                         ("1", "tab-stack"), ("2", "tab-tree")):
            await pilot.press(key)
            assert tabs.active == tab
        # The common path is folded into one node; the branches fork where the ranks diverge.
        await shows(pilot, "0-3 ModelRunner.__init__ (sglang_like.py:74)  (8 frames)",
                    "0-2 all_reduce (torch/distributed/distributed_c10d.py:3252)",
                    "3 all_gather (torch/distributed/distributed_c10d.py:4287)",
                    "from ModelRunner.init_memory_pool (sglang_like.py:94)")
        assert "spawn_main (multiprocessing/spawn.py:122)" not in screen_text(app)
        app.main.query_one(CallTree).focus()
        await pilot.press("down", "down", "enter")  # open the folded common call path
        await shows(pilot, "spawn_main (multiprocessing/spawn.py:122)")
        await pilot.press("space")  # space pauses, even in the tree
        assert app.paused


@pytest.mark.extended
@run_async
async def test_findings_tab() -> None:
    app = live([recorded("mismatch")])
    async with app.run_test(size=(100, 30)) as pilot:
        await first_sample(pilot)
        await pilot.press("4")
        await shows(pilot, "Every rank was idle on CPU",
                    "Expected 4 ranks (--nproc-per-node 4) and found all 4.")


# -- diff --------------------------------------------------------------------------------------


@run_async
async def test_diff_with_another_rank_highlights_the_first_divergent_frame() -> None:
    app = live([recorded("mismatch")])
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DiffPickScreen), "the rank picker")
        await pilot.press("escape")  # changed my mind: nothing happens
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        assert app.main.query_one(TabbedContent).active == "tab-stack"
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DiffPickScreen), "the rank picker")
        picker = app.screen
        assert isinstance(picker, DiffPickScreen)
        # Rank 3 is selected; the picker offers a rank of the other group first.
        assert picker.candidates[picker.default].pid == 7706
        await pilot.press("enter")
        await until(pilot, lambda: app.main.query_one(TabbedContent).active == "tab-diff",
                    "the diff tab")
        await shows(pilot, "rank 3 (PID 7709)  vs  rank 0 (PID 7706)", "first divergent frame",
                    "rank 3 train_step (mismatch.py:78)", "rank 0 train_step (mismatch.py:79)")


def test_diff_stacks_of_real_ranks() -> None:
    snap = recorded("mismatch")
    rank0, rank3 = snap.process(7706), snap.process(7709)
    assert rank0 is not None and rank3 is not None
    assert rank0.working_thread is not None and rank3.working_thread is not None
    diff = diff_stacks(rank0.working_thread.frames, rank3.working_thread.frames, native=False)
    assert [f.name for f in diff.common][-1] == "rank_main"
    assert (diff.left[0].name, diff.left[0].line) == ("train_step", 79)
    assert (diff.right[0].name, diff.right[0].line) == ("train_step", 78)
    # With native frames the unsymbolised outer libc frame (ASLR address) still matches.
    with_native = diff_stacks(rank0.working_thread.frames, rank3.working_thread.frames)
    assert with_native.left[0].name == "train_step"
    same = diff_stacks(rank0.working_thread.frames, rank0.working_thread.frames)
    assert same.identical
    assert diff_stacks([Frame("a", "x.py", 1)], [Frame("b", "x.py", 1)]).common == ()


# -- filter ------------------------------------------------------------------------------------


@run_async
async def test_filter_by_text_then_clear() -> None:
    app = live([recorded("mismatch")])
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen), "the filter")
        await pilot.press(*"all_reduce", "enter")
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        await shows(pilot, 'filter: "all_reduce"  (3 shown, esc clears)')
        assert [pid for _, pid in table(app).shown_keys] == [7706, 7707, 7708]
        assert stack(app).pid == 7706  # the selection follows the filter

        await pilot.press("escape")
        await hides(pilot, "filter:")
        assert table(app).row_count == 5


@pytest.mark.extended
@run_async
async def test_filter_by_group_or_category() -> None:
    app = live([recorded("sglang")])
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen), "the filter")
        await pilot.press("down", "down", "enter")  # the second group: rank 3
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        assert table(app).row_count == 1
        assert table(app).selected_pid == 7958

        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen), "the filter")
        await pilot.press(*"ipc", "down", "enter")  # typing narrows the list: category ipc_wait
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        await shows(pilot, "filter: category ipc_wait")
        assert sorted(pid for _, pid in table(app).shown_keys) == [7953, 7954, 7959]

        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen), "the filter")
        await pilot.press("ctrl+a", "ctrl+k", "enter")  # empty: everything again
        await until(pilot, lambda: app.screen is app.main, "the main screen")
        assert table(app).row_count == 7


# -- save --------------------------------------------------------------------------------------


@run_async
async def test_save_writes_the_dump_markdown_and_json(tmp_path: Path) -> None:
    snap = recorded("mismatch")
    app = live([snap], save_dir=tmp_path)
    async with app.run_test(notifications=True, size=(200, 30)) as pilot:
        await first_sample(pilot)
        await pilot.press("s")
        await until(pilot, lambda: app.saved is not None, "the report")
        md, js = app.saved  # type: ignore[misc]
        await shows(pilot, "Report saved", md.name)
        await pilot.press("s")  # a second save does not overwrite the first
        await until(pilot, lambda: app.saved is not None and app.saved[0] != md, "save 2")
    assert md == tmp_path / "hangscope-7698-20261129-091627.md"
    assert md.read_text() == render(snap, "md")
    assert js.read_text() == render(snap, "json")
    assert load(js) == snap
    assert json.loads(js.read_text())["schema"] == "hangscope.dump/1"
    for path in (md, js):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(list(tmp_path.iterdir())) == 4


def test_report_paths_do_not_overwrite(tmp_path: Path) -> None:
    snap = recorded("deadlock")
    md, _ = report_paths(snap, tmp_path)
    assert md.name == "hangscope-8020-20261129-091645.md"
    md.write_text("x")
    assert report_paths(snap, tmp_path)[1].name == "hangscope-8020-20261129-091645-2.json"


@run_async
async def test_save_error_is_shown(tmp_path: Path) -> None:
    app = live([recorded("mismatch")], save_dir=tmp_path / "missing")
    async with app.run_test(notifications=True, size=SIZE) as pilot:
        await first_sample(pilot)
        await pilot.press("s")
        await shows(pilot, "Cannot write")
        assert app.saved is None


# -- sampling: interval, pause, sample now -----------------------------------------------------


@run_async
async def test_pause_resume_and_sample_now() -> None:
    snap = recorded("mismatch")
    sampler = ReplaySampler([snap])
    app = make_app(sampler, interval=0.2, clock=Clock())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: sampler.calls >= 2, "samples on the interval")
        await pilot.press("space")
        assert app.paused
        await until(pilot, lambda: not app.sampling, "the running sample to end")
        await shows(pilot, "⏸ paused")
        calls = sampler.calls
        await pilot.pause(0.7)  # three intervals: the timer must not sample while paused
        assert sampler.calls == calls

        await pilot.press("r")  # sample now works while paused
        await until(pilot, lambda: sampler.calls == calls + 1 and not app.sampling,
                    "the sample asked for")
        assert app.paused

        await pilot.press("space")
        assert not app.paused
        await until(pilot, lambda: sampler.calls >= calls + 3, "sampling again")


@run_async
async def test_timer_skips_its_tick_while_a_sample_runs() -> None:
    sampler = ReplaySampler([recorded("mismatch")], delay=0.5)
    app = make_app(sampler, interval=0.1, clock=Clock())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: sampler.calls >= 2, "two samples")
        # Ten ticks per slow sample, but samples never overlap and none is cancelled.
        assert sampler.calls <= 3
        assert app.raw is not None


@run_async
async def test_stuck_for_grows_while_the_stack_stays_the_same() -> None:
    clock = Clock()
    first, second = recorded("straggler"), recorded("straggler-2")
    sampler = ReplaySampler([first, second])
    app = make_app(sampler, interval=3600, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        assert app.history.stuck_for[key_of(first, 8032)] == pytest.approx(first.window_s)
        assert app.history.stuck_for[key_of(first, 8035)] is None  # rank 3 spins: its stack moves
        clock.now += 65
        await pilot.press("r")
        await until(pilot, lambda: sampler.calls == 2 and not app.sampling, "the second sample")
        assert app.history.stuck_for[key_of(first, 8032)] == pytest.approx(65 + first.window_s)
        text = await shows(pilot, "≥ 1 min")  # a lower bound, and said as one (issue 20 item 4)
        assert "≥ 1 min" in row_of(text, 8032)
        assert "moving" in row_of(text, 8035)
        clock.now += 5
        await shows(pilot, "sampled 5s ago")  # the header's age ticks every second


def test_history_resets_when_the_stack_changes() -> None:
    snap = recorded("mismatch")
    history = History()
    history.update(snap, 100.0)
    assert history.stuck_for[key_of(snap, 7709)] == pytest.approx(snap.window_s)
    history.update(snap, 200.0)
    assert history.stuck_for[key_of(snap, 7709)] == pytest.approx(100 + snap.window_s)
    rank3 = snap.process(7709)
    assert rank3 is not None and rank3.working_thread is not None
    moved = replace(rank3.working_thread, frames=rank3.working_thread.frames[1:],
                    unchanged_samples=1)
    other = replace(snap, processes=tuple(
        replace(p, threads=(moved,)) if p.pid == 7709 else p for p in snap.processes))
    history.update(other, 300.0)
    assert history.stuck_for[key_of(snap, 7709)] is None  # moved within the window
    assert history.stuck_for[key_of(snap, 7706)] == pytest.approx(200 + snap.window_s)
    assert [duration_cell(s) for s in (None, 0, 59.9, 61, 3599, 3600 * 2 + 301)] == [
        "moving", "0s", "59s", "1m01s", "59m59s", "2h05m"]
    # The stuck column is a lower bound, and says so (issue 20 item 4)
    assert [at_least(s) for s in (None, 0, 59.9, 61, 3599, 3600 * 2 + 301)] == [
        "moving", "≥ 0 s", "≥ 59 s", "≥ 1 min", "≥ 59 min", "≥ 2 h"]


# -- ranks and jobs that exit ------------------------------------------------------------------


@run_async
async def test_a_rank_that_exits_shows_as_exited_and_the_app_goes_on() -> None:
    snap = recorded("mismatch")
    without_rank3 = replace(snap, processes=tuple(p for p in snap.processes if p.pid != 7709))
    sampler = ReplaySampler([snap, without_rank3])
    app = make_app(sampler, interval=3600, clock=Clock())
    async with app.run_test(size=(100, 50)) as pilot:
        await first_sample(pilot)
        await pilot.press("r")
        await until(pilot, lambda: sampler.calls == 2 and not app.sampling, "the second sample")
        text = await shows(pilot, "ranks 3/4 (1 exited)", "exited", "last stack seen")
        row = row_of(text, 7709)
        assert "exited" in row and "dead" in row
        assert "ranks 3/4 (1 exited)" in text
        assert stack(app).pid == 7709  # still selected: its last stack stays readable
        assert "EXITED" in text and "last stack seen" in text
        assert app.state is LiveState.WATCHING


@run_async
async def test_when_the_whole_job_is_gone_the_last_snapshot_stays() -> None:
    snap = recorded("mismatch")
    sampler = ReplaySampler([snap, ProcessNotFound("No process with PID 7698 exists.")])
    app = make_app(sampler, interval=0.1, clock=Clock())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.exited, "the job to be gone")
        await shows(pilot, "JOB EXITED", "(09:16:27)", "MISMATCHED COLLECTIVES",
                    "✖ target exited")
        await pilot.pause(0.3)  # three intervals
        assert sampler.calls == 2  # no more sampling once the job is gone
        assert table(app).row_count == 5
        await pilot.press("n", "d")  # the keys still work on the last snapshot
        await until(pilot, lambda: isinstance(app.screen, DiffPickScreen), "the rank picker")


@run_async
async def test_other_sampling_errors_are_shown_and_sampling_goes_on() -> None:
    snap = recorded("mismatch")
    denied = PermissionDenied("Not allowed to read the stacks of PID 7698.")
    sampler = ReplaySampler([snap, denied, snap])
    app = make_app(sampler, interval=3600, clock=Clock())
    async with app.run_test(size=(100, 30)) as pilot:
        await first_sample(pilot)
        await pilot.press("r")
        await until(pilot, lambda: app.error is not None, "the error")
        # The remedy comes with it.
        await shows(pilot, "Last sample failed: Not allowed to read the stacks", "ptrace")
        await pilot.press("r")
        await until(pilot, lambda: app.error is None, "a good sample")


# -- responsiveness and quitting ---------------------------------------------------------------


@pytest.mark.quiet  # a time is the assertion
@run_async
async def test_keys_are_handled_while_a_slow_sample_runs() -> None:
    sampler = ReplaySampler([recorded("mismatch")], delay=6.0)
    app = make_app(sampler, interval=3600, clock=Clock())
    async with app.run_test(notifications=True, size=SIZE) as pilot:
        await until(pilot, lambda: sampler.running.is_set(), "the slow sample to start")
        started = time.monotonic()
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "n", "space", "r")
        assert app.main.native is False and app.paused
        await shows(pilot, "A sample is already running.", "● sampling")
        assert sampler.running.is_set()  # all of that happened during the one slow sample
        assert time.monotonic() - started < 6.0
        assert sampler.calls == 0


@pytest.mark.quiet  # a time is the assertion
def test_quit_returns_promptly_during_a_slow_sample() -> None:
    sampler = ReplaySampler([recorded("mismatch")], delay=30.0)
    app = make_app(sampler, interval=3600, clock=Clock())

    async def quit_while_sampling() -> float:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: sampler.running.is_set(), "the slow sample to start")
            pressed = time.monotonic()
            await pilot.press("q")
        return pressed

    # Timed around asyncio.run: its shutdown joins executor threads, so a worker blocked in
    # the sampler would hold the exit here for the whole 30 s sweep.
    pressed = asyncio.run(quit_while_sampling())
    assert time.monotonic() - pressed < 3
    assert app.return_code == 0
    assert sampler.running.is_set()  # the sweep is still going: it was not waited for


# -- help, offline -----------------------------------------------------------------------------


@run_async
async def test_help_lists_every_key() -> None:
    app = live([recorded("mismatch")])
    # tall enough for every key at once (at 80x24 the help scrolls: tests/tui/test_newcomer_tmux)
    async with app.run_test(size=(100, 60)) as pilot:
        await first_sample(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = await shows(pilot, "hangscope attach: keys")
        for key, what in KEYS:
            assert f"{key}" in text and what[:30] in text
        await pilot.press("escape")
        assert app.screen is app.main


@pytest.mark.extended
@run_async
async def test_offline_dump_never_samples() -> None:
    app = make_app(snapshot=recorded("deadlock"), clock=Clock())
    async with app.run_test(notifications=True, size=SIZE) as pilot:
        await until(pilot, lambda: app.raw is not None, "the dump")
        await shows(pilot, "□ offline", "dump of 2026-11-29 09:16", "LOCAL DEADLOCK")
        await pilot.press("r", "space")
        # (the toast is over the header's row now, off the stack: issue 20 item 18)
        await shows(pilot, "Offline: this is a saved dump", "LOCAL DEADLOCK")
        assert app.state is LiveState.OFFLINE and not app.paused
        app.main.query_one("#threads", OptionList).focus()
        names = {stack(app).tid}
        await pilot.press("down")
        await until(pilot, lambda: stack(app).tid not in names, "the other thread")
        await pilot.press("d")  # one process: nothing to diff against
        await shows(pilot, "No other process")


def test_make_app_needs_a_sampler_or_a_snapshot() -> None:
    with pytest.raises(ValueError):
        make_app()


@run_async
async def test_selection_follows_a_new_verdict_but_otherwise_stays() -> None:
    snap = recorded("mismatch")
    assert snap.verdict is not None
    earlier = replace(snap, verdict=replace(snap.verdict, suspects=(7706,)))
    sampler = ReplaySampler([earlier, earlier, snap])
    app = make_app(sampler, interval=3600, clock=Clock())
    async with app.run_test(size=SIZE) as pilot:
        await first_sample(pilot)
        assert table(app).selected_pid == 7706
        await pilot.press("down")  # the user picks rank 1 ...
        await until(pilot, lambda: stack(app).pid == 7707, "rank 1")
        await pilot.press("r")  # ... and a refresh with the same verdict keeps it
        await until(pilot, lambda: sampler.calls == 2 and not app.sampling, "sample 2")
        await pilot.pause()
        assert table(app).selected_pid == 7707
        await pilot.press("r")  # a new verdict: its suspect is selected
        await until(pilot, lambda: sampler.calls == 3 and not app.sampling, "sample 3")
        await until(pilot, lambda: stack(app).pid == 7709, "the new suspect")
        assert table(app).selected_pid == 7709


@run_async
async def test_a_job_gone_before_the_first_sample() -> None:
    sampler = ReplaySampler([ProcessNotFound("No process with PID 7698 exists.")], target=7698)
    app = make_app(sampler, interval=3600, clock=Clock())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.exited, "the job to be gone")
        await shows(pilot, "JOB EXITED: PID 7698 and its job are gone")
        await pilot.press("s", "d", "slash", "n")  # nothing to act on: no crash
        await pilot.pause()
        assert app.screen is app.main


def test_call_sites_are_cut_to_the_column_keeping_function_and_line() -> None:
    site = "ModelRunner.init_memory_pool (sglang_like.py:97)"
    assert fit_site(site, 60) == site
    assert fit_site(site, 20) == "init_memory_pool:97"
    assert fit_site(site, 14) == "init_memor…:97"
    assert fit_site("the process exited during sampling", 14) == "the process e…"


def test_gpu_column_only_when_some_process_uses_a_gpu() -> None:
    snap = recorded("mismatch")
    assert "gpu" not in table_columns(snap)
    host = replace(snap.hosts[0], gpus=(Gpu(index=0, utilization=97.0),))
    with_gpu = replace(snap, hosts=(host,), processes=tuple(
        replace(p, gpus=(GpuProcessUse(gpu_index=0),)) if p.pid == 7706 else p
        for p in snap.processes))
    columns = table_columns(with_gpu)
    assert "gpu" in columns
    rank0, rank1 = with_gpu.process(7706), with_gpu.process(7707)
    assert rank0 is not None and rank1 is not None
    gpu = columns.index("gpu")
    assert row_cells(rank0, with_gpu, {}, columns)[gpu].plain == "0:97%"
    assert row_cells(rank1, with_gpu, {}, columns)[gpu].plain == "-"


def test_a_dead_rank_keeps_its_name_and_a_dead_job_is_gone() -> None:
    snap = recorded("mismatch")
    history = History()
    history.update(snap, 100.0)
    # Not reaped yet: /proc has lost its command line, so discovery calls it "other".
    zombie = replace(snap, processes=tuple(
        replace(p, state="Z", role=Role.OTHER, rank=None, threads=()) if p.pid == 7709 else p
        for p in snap.processes))
    shown = history.update(zombie, 102.0)
    rank3 = shown.process(7709)
    assert rank3 is not None
    assert (rank3.name, rank3.state) == ("rank 3", "Z")
    assert rank3.working_thread is not None  # the last stack seen
    assert key_of(snap, 7709) not in history.stuck_for
    assert not shown.all_exited
    all_dead = replace(snap, processes=tuple(replace(p, state="Z") for p in snap.processes))
    assert all_dead.all_exited


@run_async
async def test_the_kernels_key_reads_kernels_of_a_live_job_only() -> None:
    app = make_app(snapshot=recorded("deadlock"), clock=Clock())
    async with app.run_test(notifications=True, size=SIZE) as pilot:
        await until(pilot, lambda: app.raw is not None, "the dump")
        await pilot.press("k")
        await shows(pilot, "Kernels are read from")
