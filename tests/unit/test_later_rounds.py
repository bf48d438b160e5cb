"""A later round reads no stack of a process the window, already over, saw progress.

On a machine a busy engine holds (a vLLM Worker on both cores), the first round outlasts the
window; the later rounds then re-read every process, each py-spy call waiting seconds for a
core (issue 34: about 30 py-spy runs per busy dump). The window's verdict on a process that
progressed cannot be changed by a stack: its /proc facts are read, not its stacks.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from hangscope.live.sampler import Sampler
from hangscope.model import Process
from hangscope.model.progress import (
    CounterDelta,
    ProcessProgress,
    ProgressEvidence,
    StackCount,
    ThreadProgress,
)


@dataclass
class _Ended:
    """What the sampler asks of its watcher here: the window's evidence once it is over."""

    ended: ProgressEvidence | None

    def pausing(self, pid: int) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


@pytest.fixture
def child() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _computed(pid: int) -> ProgressEvidence:
    """The window saw the main thread on a CPU, its line moving: progressing."""
    stacks = (StackCount(("main (job.py:9)", "step (job.py:4)"), 60),
              StackCount(("main (job.py:9)", "step (job.py:5)"), 40))
    thread = ThreadProgress(pid, "MainThread", 100, stacks,
                            CounterDelta(cpu_ns=900_000_000, runs=40, voluntary=2))
    return ProgressEvidence(1.0, 100, (ProcessProgress(pid, (thread,), sampled=True),))


def _sampler(pid: int, ended: ProgressEvidence | None) -> tuple[Sampler, list[int]]:
    sampler = Sampler(pid)
    read: list[int] = []
    real = sampler._refresh.sample

    def sample(proc: Process, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        read.append(proc.pid)
        return real(proc, *args, **kwargs)  # type: ignore[arg-type]

    sampler._refresh.sample = sample  # type: ignore[method-assign]
    sampler._watcher = _Ended(ended)  # type: ignore[assignment]
    return sampler, read


def test_a_process_the_ended_window_saw_progress_is_not_read_again(child: int) -> None:
    sampler, read = _sampler(child, _computed(child))
    proc = sampler.discover()[1][0]
    later = sampler._sample(proc, False, False, previous={})
    assert later.dump is None and later.proc.exists and later.proc.tasks, later
    assert read == []
    first = sampler._sample(proc, True, True, previous=None)  # round one always reads
    assert read == [child] and first.dump is not None


def test_while_the_window_runs_a_later_round_reads_the_stacks(child: int) -> None:
    sampler, read = _sampler(child, None)
    proc = sampler.discover()[1][0]
    later = sampler._sample(proc, False, False, previous={})
    assert read == [child] and later.dump is not None


def test_the_last_round_after_the_watcher_stopped_still_skips_it(child: int) -> None:
    # the last round starts once the watcher is stopped: the late window's evidence is kept
    sampler, read = _sampler(child, None)
    sampler._watcher = None
    sampler._late_window = _computed(child)
    proc = sampler.discover()[1][0]
    assert sampler._sample(proc, False, False, previous={}).dump is None and read == []
