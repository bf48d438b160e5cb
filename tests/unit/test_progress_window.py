"""The progress window ends by itself (``ProgressWatcher.end_after``), never halfway through a
pause, and moves on by the longest pause of a watched process.

Real processes: a child asleep in ``sys.stdin.read()``; the "pause" is the caller's own
``pausing`` block (what a blocking py-spy read does around its ptrace stop), counters only.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from hangscope.collect.progress import ProgressWatcher


@pytest.fixture
def sleeper() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait(timeout=30)


def _watcher(pid: int) -> ProgressWatcher:
    watcher = ProgressWatcher([pid], record=False, gpus=False)
    watcher.start()
    return watcher


def _ended(watcher: ProgressWatcher, deadline_s: float = 10.0) -> None:
    deadline = time.monotonic() + deadline_s
    while watcher.ended is None:
        assert time.monotonic() < deadline, "the window did not end by itself"
        time.sleep(0.01)


def test_the_window_ends_by_itself_and_stop_returns_it(sleeper: int) -> None:
    watcher = _watcher(sleeper)
    watcher.end_after(0.3)
    _ended(watcher)
    ended = watcher.ended
    assert ended is not None and 0.3 <= ended.seconds < 2.0, ended
    time.sleep(0.2)  # a caller that comes late gets the window that was, not a longer one
    assert watcher.stop() is ended


def test_the_end_waits_for_a_pause_in_flight_and_counts_it(sleeper: int) -> None:
    watcher = _watcher(sleeper)
    inside, release = threading.Event(), threading.Event()

    def pause() -> None:
        with watcher.pausing(sleeper):
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=pause)
    thread.start()
    assert inside.wait(10)
    ender = threading.Thread(target=watcher.stop)
    ender.start()
    ender.join(0.3)
    assert ender.is_alive() and watcher.ended is None  # held while the target is stopped
    release.set()
    thread.join(10)
    ender.join(10)
    ended = watcher.ended
    assert ended is not None and ended.processes[0].pauses == 1, ended


def test_a_pause_after_the_end_is_not_counted(sleeper: int) -> None:
    watcher = _watcher(sleeper)
    ended = watcher.stop()
    with watcher.pausing(sleeper):
        pass
    assert ended.processes[0].pauses == 0 and watcher.stop() is ended


def test_the_end_moves_on_by_the_longest_pause(sleeper: int) -> None:
    watcher = _watcher(sleeper)
    watcher.end_after(0.4)
    with watcher.pausing(sleeper):
        time.sleep(0.5)  # held stopped for longer than the whole window
    _ended(watcher)
    ended = watcher.ended
    # seen unpaused for the window asked for: 0.5 s paused + 0.4 s
    assert ended is not None and ended.seconds >= 0.85, ended
    assert ended.processes[0].pauses == 1, ended


def test_a_process_not_watched_neither_waits_for_the_end_nor_holds_it(sleeper: int) -> None:
    watcher = _watcher(sleeper)
    inside, release = threading.Event(), threading.Event()

    def pause() -> None:
        with watcher.pausing(sleeper + 10**6):  # another process's read, not watched
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=pause)
    thread.start()
    try:
        assert inside.wait(10)
        ended = watcher.stop()  # not held by the read in flight
        assert ended.processes[0].pauses == 0, ended
    finally:
        release.set()
        thread.join(10)
