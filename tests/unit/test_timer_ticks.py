"""A supervisor's health check caught in the window: its line left its timed wait briefly.

GIVEN ``uvicorn --workers 2`` idle, dumped on a loaded machine, where the 100 Hz window caught
the master in its ping to a worker (4 of 219 samples outside ``Event.wait(0.5)``, 8 small
writes and 16 small reads: a ping and a pong per worker per tick) THEN idle: its own timer
woke it (the kernel's futex wait has a deadline), so the bytes are its check, not the job's
data (the frameworks tier read "progressing" on CI). The same window with a wait that has no
deadline, with real data written, or with writes no read answers stays progressing.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.serialize import load

DUMP = Path(__file__).parent.parent / "fixtures" / "frameworks" / "uvicorn_ping_sampled.dump.json"


def _master(snap: Snapshot) -> int:
    return min(p.pid for p in snap.processes)


def _untimed(snap: Snapshot) -> Snapshot:
    """The master's futex wait with no deadline (its fourth argument null)."""
    assert snap.waits is not None and snap.waits.kernel is not None
    kernel = snap.waits.kernel
    procs = tuple(replace(pf, syscalls=tuple(
        replace(c, args=(*c.args[:3], 0, *c.args[4:])) if c.tid == _master(snap) else c
        for c in pf.syscalls)) for pf in kernel.processes)
    return replace(snap, waits=replace(snap.waits, kernel=replace(kernel, processes=procs)))


def _master_io(snap: Snapshot, **io: int) -> Snapshot:
    """The master's thread with these I/O counters instead of its own."""
    readings = []
    for reading in snap.readings:
        evidence = reading.progress
        assert evidence is not None
        procs = tuple(replace(p, threads=tuple(
            replace(t, io=replace(t.io, **io)) if t.tid == p.pid and t.io else t
            for t in p.threads)) if p.pid == _master(snap) else p for p in evidence.processes)
        readings.append(replace(reading, progress=replace(evidence, processes=procs)))
    return replace(snap, readings=tuple(readings))


def test_a_supervisor_caught_in_its_health_check_is_idle() -> None:
    snap = analyze(load(DUMP))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.IDLE, verdict
    assert verdict.suspects == (), verdict
    assert f"PID {_master(snap)} is idle at Multiprocess.run" in verdict.summary, verdict


def test_the_same_loop_on_a_wait_with_no_deadline_is_progress() -> None:
    verdict = analyze(_untimed(load(DUMP))).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict


def test_the_same_timed_loop_writing_data_is_progress() -> None:
    verdict = analyze(_master_io(load(DUMP), wchar=65536)).verdict  # 8 writes of 8 KiB
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict


def test_the_same_timed_loop_writing_lines_nobody_answers_is_progress() -> None:
    """Small writes with no read between its timed waits: a worker printing each step between
    sleeps, its data moving where /proc/PID/io does not count it (a gloo recv): no round trip,
    so no health check."""
    verdict = analyze(_master_io(load(DUMP), syscr=0, rchar=0)).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
