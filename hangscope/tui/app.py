"""The live TUI of ``hangscope attach`` and ``hangscope show --tui``.

The app only renders Snapshots. A thread worker takes them from an injected sampler and posts
``SnapshotReady``; a timer starts the next one, skipping its tick while one still runs (an
``exclusive`` worker restarted every tick would cancel a slow 8-rank sweep forever).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from textual import work
from textual.app import App
from textual.message import Message
from textual.screen import Screen
from textual.worker import get_current_worker

from hangscope.errors import HangscopeError, ProcessNotFound
from hangscope.model import Snapshot, VerdictKind
from hangscope.render.output import render, write_private
from hangscope.tui.header import JobHeader, LiveState
from hangscope.tui.history import History
from hangscope.tui.mainscreen import MainScreen
from hangscope.tui.source import SnapshotSource

#: How often the worker checks whether the app is closing while a sample runs.
_POLL_S = 0.05


@dataclass
class SnapshotReady(Message):
    """A sample finished."""

    snapshot: Snapshot


@dataclass
class SampleFailed(Message):
    """A sample raised; ProcessNotFound means the whole job is gone."""

    error: BaseException


def report_paths(snap: Snapshot, save_dir: Path) -> tuple[Path, Path]:
    """``hangscope-<pid>-<when>.md`` and ``.json`` in ``save_dir``, not overwriting older ones."""
    pid = snap.job.launcher or snap.job.target or 0
    try:
        when = datetime.fromisoformat(snap.created).strftime("%Y%m%d-%H%M%S")
    except ValueError:
        when = "snapshot"
    stem = f"hangscope-{pid}-{when}"
    n = 1
    while True:
        md, js = save_dir / f"{stem}.md", save_dir / f"{stem}.json"
        if not md.exists() and not js.exists():
            return md, js
        n += 1
        stem = f"hangscope-{pid}-{when}-{n}"


class HangscopeApp(App[int]):
    """Live (with a sampler) or offline (one saved Snapshot) view of a hung job."""

    CSS_PATH = "hangscope.tcss"
    TITLE = "hangscope"
    ENABLE_COMMAND_PALETTE = False
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    def __init__(self, sampler: SnapshotSource | None = None, *, snapshot: Snapshot | None = None,
                 interval: float = 2.0, save_dir: str | Path = ".",
                 clock: Callable[[], float] = time.monotonic) -> None:
        # With NO_COLOR, Textual greys colours by luminance, which leaves red text barely
        # readable; native ANSI mode strips colours instead, so text keeps the terminal's own.
        super().__init__(ansi_color=True if "NO_COLOR" in os.environ else None)
        if sampler is None and snapshot is None:
            raise ValueError("make_app needs a sampler (live) or a snapshot (offline)")
        self.sampler = sampler
        self.interval = interval
        self.save_dir = Path(save_dir)
        self.clock = clock
        self.history = History()
        self.raw: Snapshot | None = None  # the latest Snapshot as sampled: what `s` saves
        self.received_at: float | None = None
        self.paused = False
        self.sampling = False
        self.exited = False
        self.error: str | None = None
        self.saved: tuple[Path, Path] | None = None
        self._initial_snapshot = snapshot
        self._quitting = threading.Event()
        self.target = sampler.target if sampler is not None else (
            snapshot.job.target if snapshot is not None else None)

    def get_default_screen(self) -> Screen:
        return MainScreen(self.target)

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    @property
    def offline(self) -> bool:
        return self.sampler is None

    @property
    def state(self) -> LiveState:
        if self.offline:
            return LiveState.OFFLINE
        if self.exited:
            return LiveState.EXITED
        if self.sampling:
            return LiveState.SAMPLING
        if self.paused:
            return LiveState.PAUSED
        if self.raw is None:
            return LiveState.STARTING
        return LiveState.WATCHING

    def on_ready(self) -> None:
        # Ready, not Mount: the main screen's widgets exist only once it has been composed.
        if self._initial_snapshot is not None:
            self._accept(self._initial_snapshot)
        self.set_interval(1.0, self._show_state)
        if self.sampler is not None:
            self.set_interval(self.interval, self._tick)
            self._start_sample()
        self._show_state()

    @property
    def _displaying(self) -> bool:
        """The main screen's widgets exist (not so once shutdown has begun: timers still fire)."""
        return self.is_running and not self._quitting.is_set() and bool(
            self.main.query(JobHeader))

    def _show_state(self) -> None:
        if not self._displaying:
            return
        age = None if self.received_at is None else self.clock() - self.received_at
        self.main.show_state(self.state, age, self.exited, self.error)

    # -- sampling ------------------------------------------------------------------------
    def _tick(self) -> None:
        if self.paused or self.sampling or self.exited or not self._displaying:
            return
        self._start_sample()

    def _start_sample(self) -> None:
        self.sampling = True
        self._sample()
        self._show_state()

    @work(thread=True, exit_on_error=False, group="sample")
    def _sample(self) -> None:
        """Run one ``sampler.snapshot()`` and post the result.

        The call runs in a daemon thread the worker only waits on, so quitting never waits
        for a slow sweep (its py-spy runs end by their own timeout; targets are not signalled).
        """
        sampler = self.sampler
        assert sampler is not None
        worker = get_current_worker()
        result: list[Snapshot | BaseException] = []
        done = threading.Event()

        def run() -> None:
            try:
                result.append(sampler.snapshot())
            except BaseException as exc:  # handed to the UI thread, which shows it
                result.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name="hangscope-sample", daemon=True).start()
        while not done.wait(_POLL_S):
            if worker.is_cancelled or self._quitting.is_set():
                return
        if worker.is_cancelled or self._quitting.is_set():
            return
        outcome = result[0]
        if isinstance(outcome, Snapshot):
            self.post_message(SnapshotReady(outcome))
        else:
            self.post_message(SampleFailed(outcome))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.sampling = False
        self.error = None
        snap = message.snapshot
        self.exited = snap.all_exited or (
            snap.verdict is not None and snap.verdict.kind is VerdictKind.NO_TARGET)
        if not self.exited or self.raw is None:
            # Once the job is gone, the last Snapshot that had it stays on screen.
            self._accept(snap)
        self._show_state()

    def on_sample_failed(self, message: SampleFailed) -> None:
        self.sampling = False
        error = message.error
        if isinstance(error, ProcessNotFound):
            self.exited = True
        elif isinstance(error, HangscopeError):
            partial = getattr(error, "snapshot", None)
            if isinstance(partial, Snapshot):
                self._accept(partial)
            self.error = error.message + (f" Fix: {error.help_text}" if error.help_text else "")
        else:
            self.error = f"internal error: {type(error).__name__}: {error}"
        self._show_state()

    def _accept(self, snap: Snapshot) -> None:
        self.raw = snap
        self.received_at = self.clock()
        shown = self.history.update(snap, self.received_at)
        if self._displaying:
            self.main.show_snapshot(shown, self.history.stuck_for)

    # -- actions -------------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        if self.offline:
            self.notify("Offline: this is a saved dump, there is nothing to sample.")
            return
        self.paused = not self.paused
        self._show_state()

    def action_sample_now(self) -> None:
        if self.offline:
            self.notify("Offline: this is a saved dump, there is nothing to sample.")
            return
        if self.sampling:
            self.notify("A sample is already running.", timeout=2)
            return
        self._start_sample()

    def action_kernels(self) -> None:
        """Sample once now with ``--kernels``: cuda-gdb names the kernel on each stuck rank
        whose GPU spins (each such rank pauses for seconds)."""
        request = getattr(self.sampler, "request_kernels", None)
        if self.offline or request is None:
            self.notify("Kernels are read from a live job only (hangscope attach).")
            return
        if self.sampling:
            self.notify("A sample is already running; press k again after it.", timeout=3)
            return
        request()
        self.notify("Reading kernels with cuda-gdb: each stuck rank whose GPU spins pauses "
                    "for seconds.", timeout=4)
        self._start_sample()

    def action_save(self) -> None:
        snap = self.raw
        if snap is None:
            self.notify("Nothing to save yet: the first sample is still running.",
                        severity="warning")
            return
        md, js = report_paths(snap, self.save_dir)
        try:
            write_private(md, render(snap, "md"))
            write_private(js, render(snap, "json"))
        except HangscopeError as exc:
            self.notify(exc.message, severity="error", timeout=8)
            return
        self.saved = (md.resolve(), js.resolve())
        # Relative to where hangscope runs when they are below it: a toast at 80 columns
        # breaks a long absolute path over two lines, and a broken name cannot be pasted.
        shown = [_near(path) for path in self.saved]
        self.notify("\n".join(shown), title="Report saved", timeout=8)

    async def action_quit(self) -> None:
        self._quitting.set()
        self.exit(0)

    def on_unmount(self) -> None:
        self._quitting.set()


def make_app(sampler: SnapshotSource | None = None, *, snapshot: Snapshot | None = None,
             interval: float = 2.0, save_dir: str | Path = ".",
             clock: Callable[[], float] = time.monotonic) -> HangscopeApp:
    """The app for ``hangscope attach`` (a sampler), ``show --tui`` (a snapshot) and the tests."""
    return HangscopeApp(sampler, snapshot=snapshot, interval=interval, save_dir=save_dir,
                        clock=clock)


def run_live(sampler: SnapshotSource, interval: float = 2.0, save_dir: str | Path = ".") -> int:
    """Run the live TUI until the user quits; the exit code for the CLI."""
    app = make_app(sampler, interval=interval, save_dir=save_dir)
    app.run()
    return app.return_code or 0


def run_offline(snapshot: Snapshot) -> int:
    """Open a saved Snapshot in the TUI, without sampling."""
    app = make_app(snapshot=snapshot)
    app.run()
    return app.return_code or 0


def _near(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
