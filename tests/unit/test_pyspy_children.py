"""Ctrl-C ends every py-spy hangscope started (collect/pyspy.py ``_Children``), also when it
lands while the main thread is starting one: the handler runs on that thread, between two of
its bytecodes, inside ``popen``."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from hangscope.collect import pyspy
from hangscope.collect.pyspy import Interrupted, _Children

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_ctrl_c_inside_a_start_neither_deadlocks_nor_misses_the_new_child(
        monkeypatch: pytest.MonkeyPatch) -> None:
    children = _Children()
    started: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen

    def start_then_ctrl_c(cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real(cmd, **kwargs)
        started.append(proc)
        children.stop_all()  # what the handler does, on this thread, inside popen's lock
        return proc

    monkeypatch.setattr(pyspy.subprocess, "Popen", start_then_ctrl_c)
    outcome: list[object] = []

    def start() -> None:
        try:
            children.popen(SLEEPER)
        except Interrupted as exc:
            outcome.append(exc)

    worker = threading.Thread(target=start, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "deadlocked: stop_all waited for the lock its own thread held"
    assert len(outcome) == 1 and isinstance(outcome[0], Interrupted)
    assert started[0].poll() is not None  # the child it was starting is ended too
    with pytest.raises(Interrupted):  # and nothing starts after
        children.popen(SLEEPER)


def test_stop_all_ends_the_live_children() -> None:
    children = _Children()
    procs = [children.popen(SLEEPER) for _ in range(2)]
    children.stop_all()
    assert all(p.poll() is not None for p in procs)
