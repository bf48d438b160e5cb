"""The progress watcher on single real processes: busy in one C call, not Python, exiting."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from support import running_target

from hangscope.analyze.evidence.progress import IDLE_CPU_SHARE, SLOW, STUCK, decide
from hangscope.collect.progress import watch
from hangscope.model.progress import ProcessProgress

TARGET = Path(__file__).resolve().parent.parent / "targets" / "progress_single.py"


def _watch(pid: int) -> tuple[ProcessProgress, float]:
    evidence = watch([pid], 2.0, gpus=False).evidence
    return evidence.processes[0], evidence.seconds


def test_busy_in_one_c_call_without_gpu_is_slow_not_stuck(tmp_path: Path) -> None:
    # GIVEN a process at 100% CPU inside one regex call (a spin or work: nothing tells)
    ready = tmp_path / "ready"
    with running_target([sys.executable, str(TARGET), "regex", str(ready)], tmp_path,
                        tags=["regex"], timeout=30) as target:
        time.sleep(0.2)
        proc, seconds = _watch(target.launcher)
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


def test_non_python_process_is_judged_by_its_counters(tmp_path: Path) -> None:
    # GIVEN a process py-spy cannot read (not Python), asleep for good
    with running_target(["sleep", "1000"], tmp_path) as target:
        time.sleep(0.2)
        proc, seconds = _watch(target.launcher)
    rank = decide(proc, seconds)
    # THEN py-spy's failure is recorded and the counters still decide
    assert not proc.sampled and proc.error_kind == "not_python", proc.error
    assert rank.decision == STUCK and "no Python samples" in rank.reason


def test_process_that_exits_mid_window_is_not_called_stuck(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    with running_target([sys.executable, str(TARGET), "exit", str(ready)], tmp_path,
                        tags=["exit"], timeout=30) as target:
        target.popen.wait(timeout=10)  # reaped, as a launcher would
        proc, seconds = _watch(target.launcher)
    rank = decide(proc, seconds)
    assert proc.gone and rank.decision == SLOW and "exited" in rank.reason
