"""Progress watcher + decision on real gloo jobs (tests/targets/progress_gloo.py, 4 ranks on CPU).

A job whose steps are almost all ``time.sleep`` or waiting for a peer must read as progressing
in every one of 20 windows; hung jobs must read as stuck. Readiness: each rank appends a line
to a ready file once in its steady state; the test polls that file with a deadline.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import running_target

from hangscope.analyze.evidence.progress import PROGRESSING, STUCK, decide_all, job_progress
from hangscope.collect.progress import ProgressWatcher

# The progress jobs measure CPU and wakeups of 4 busy ranks: one such job at a time.
pytestmark = pytest.mark.xdist_group("progress")
TARGET = Path(__file__).resolve().parent.parent / "targets" / "progress_gloo.py"
NPROC = 4
WINDOW_S = 2.0


@pytest.fixture
def gloo_job(tmp_path: Path) -> Iterator[object]:
    """Factory: start(mode) -> rank PIDs, once each rank is in its steady state (a ready line
    each); the job's process group is killed at teardown."""
    with contextlib.ExitStack() as stack:
        def start(mode: str) -> list[int]:
            workdir = tmp_path / mode
            ready = workdir / "ready"
            job = stack.enter_context(running_target(
                [sys.executable, str(TARGET), mode, "--nproc", str(NPROC), "--ready-file",
                 str(ready)], workdir, ready=lambda t: len(t.ready_lines()) >= NPROC))
            return sorted(int(line.split()[0]) for line in job.ready_lines())

        yield start


def _window(pids: list[int]) -> tuple[str, list[str]]:
    watcher = ProgressWatcher(pids, gpus=False)
    watcher.start()
    time.sleep(WINDOW_S)
    evidence = watcher.stop()
    assert evidence.error is None, evidence.error
    ranks = decide_all(evidence)
    return job_progress(ranks).decision, [f"{r.decision}/{r.evidence}: {r.reason}" for r in ranks]


def _progressing_windows(pids: list[int], count: int) -> None:
    results = [_window(pids) for _ in range(count)]
    wrong = [detail for decision, detail in results if decision != PROGRESSING]
    assert not wrong, f"{len(wrong)}/{count} windows not progressing, first: {wrong[0]}"


@pytest.mark.extended
def test_sleepy_job_reads_progressing_in_5_of_5_windows(gloo_job) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a job whose rank 0 sleeps 300 ms per step while ranks 1-3 wait for it in all_reduce,
    # WHEN it is watched for 5 default windows in a row, THEN every window says progressing
    _progressing_windows(gloo_job("sleepy"), 5)


@pytest.mark.slow
def test_sleepy_job_reads_progressing_in_20_of_20_windows(gloo_job) -> None:  # type: ignore[no-untyped-def]
    _progressing_windows(gloo_job("sleepy"), 20)  # the soak: 20 windows in a row


@pytest.mark.extended
@pytest.mark.parametrize("mode", ["mismatch", "blocked", "poll"])
def test_hung_job_reads_stuck(gloo_job, mode: str) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a job that is hung for good (mismatched collectives; a rank blocked on a lock; a
    # rank polling a flag nobody sets, which wakes 20 times a second)
    pids = gloo_job(mode)
    # WHEN watched twice
    results = [_window(pids) for _ in range(2)]
    # THEN it is stuck both times and the reason names the blocked wait
    for decision, detail in results:
        assert decision == STUCK, detail
        assert any("0 wake-ups" in line for line in detail), detail


def _window_with_blocking_dumps(pids: list[int]) -> tuple[str, list[str]]:
    """A window during which every rank is also read by 2 blocking ``py-spy dump`` runs."""
    from hangscope.collect.pyspy import find_pyspy

    pyspy = find_pyspy()
    watcher = ProgressWatcher(pids, gpus=False)
    watcher.start()
    for _ in range(2):
        time.sleep(WINDOW_S / 2)
        for pid in pids:  # ptrace-stops the rank: 2 wake-ups of each of its threads
            subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, timeout=30,
                           check=False)
            watcher.note_pause(pid)
    evidence = watcher.stop()
    ranks = decide_all(evidence)
    return job_progress(ranks).decision, [f"{r.decision}/{r.evidence}: {r.reason}" for r in ranks]


@pytest.mark.parametrize(("mode", "want"), [("mismatch", STUCK), ("sleepy", PROGRESSING)])
def test_noted_blocking_dumps_do_not_count_as_wakeups(gloo_job, mode: str, want: str) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a hung or a healthy job, read by blocking py-spy dumps during the window (noted)
    pids = gloo_job(mode)
    # WHEN watched
    decision, detail = _window_with_blocking_dumps(pids)
    # THEN py-spy's own wake-ups are discounted: hung stays stuck, healthy stays progressing
    assert decision == want, detail
