"""The progress watcher on single real processes: busy in one C call, not Python, exiting."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangscope.analyze.progress import IDLE_CPU_SHARE, SLOW, STUCK, decide
from hangscope.collect.progress import watch
from hangscope.progress_evidence import ProcessProgress

TARGET = Path(__file__).resolve().parent.parent / "targets" / "progress_single.py"


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _start(procs: list[subprocess.Popen[bytes]], cmd: list[str], ready: Path | None) -> int:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(proc)
    deadline = time.monotonic() + 30
    while ready is not None and not (ready.exists() and ready.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, "target not ready"
        time.sleep(0.02)
    return proc.pid


def _watch(pid: int) -> tuple[ProcessProgress, float]:
    evidence = watch([pid], 2.0, gpus=False).evidence
    return evidence.processes[0], evidence.seconds


def test_busy_in_one_c_call_without_gpu_is_slow_not_stuck(started, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a process at 100% CPU inside one regex call (a spin or work: nothing tells)
    ready = tmp_path / "ready"
    pid = _start(started, [sys.executable, str(TARGET), "regex", str(ready)], ready)
    time.sleep(0.2)
    proc, seconds = _watch(pid)
    rank = decide(proc, seconds)
    # THEN it is slow, and the sentence gives the CPU it burnt in that one line
    assert rank.decision == SLOW and rank.evidence == "counters", rank.reason
    assert "match (re/__init__.py" in rank.reason
    counters = proc.threads[0].counters
    assert counters and counters.cpu_ns and counters.runs
    if counters.cpu_ns > IDLE_CPU_SHARE * seconds * 1e9:
        assert "a spin or work" in rank.reason, rank.reason
    else:  # a loaded machine (shared VM) starved it: said so, never "blocked"
        assert "runnable but got only" in rank.reason and counters.voluntary == 0, rank.reason


def test_non_python_process_is_judged_by_its_counters(started) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a process py-spy cannot read (not Python), asleep for good
    pid = _start(started, ["sleep", "1000"], None)
    time.sleep(0.2)
    proc, seconds = _watch(pid)
    rank = decide(proc, seconds)
    # THEN py-spy's failure is recorded and the counters still decide
    assert not proc.sampled and proc.error_kind == "not_python", proc.error
    assert rank.decision == STUCK and "no Python samples" in rank.reason


def test_process_that_exits_mid_window_is_not_called_stuck(started, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ready = tmp_path / "ready"
    pid = _start(started, [sys.executable, str(TARGET), "exit", str(ready)], ready)
    started[0].wait(timeout=10)  # reaped, as a launcher would
    proc, seconds = _watch(pid)
    rank = decide(proc, seconds)
    assert proc.gone and rank.decision == SLOW and "exited" in rank.reason
