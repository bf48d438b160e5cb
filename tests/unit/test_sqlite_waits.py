"""SQLite's busy handler on a thread's stack is a wait for the database lock's holder
(analyze/graph/sqliteedges.py), on a recorded dump of tests/targets/party_jobs.py sqlite_held:
the catalog holds ``BEGIN IMMEDIATE`` while it reads a pipe from its indexer, whose insert
retries the locked database for ever (tiiuae/sbomnix#118)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hangscope.analyze import analyze
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.serialize import load

DUMP = (Path(__file__).resolve().parent.parent / "fixtures" / "waitgraph"
        / "sqlite_held.dump.json")


def _cut(snap: Snapshot, pid: int, libc: bool = False) -> Snapshot:
    """The indexer's native stack as an unwind that stopped at libsqlite3's first unnamed
    frame (seen under load): the sleep, and SQLite's static caller, nothing above; or
    (``libc``) one that stopped at the C library's ``usleep``."""
    procs = []
    for proc in snap.processes:
        if proc.pid == pid:
            threads = []
            for t in proc.threads:
                native = [f for f in t.frames if f.native]
                first = next(i for i, f in enumerate(native) if "libsqlite3" in (f.module or ""))
                first -= 1 if libc else 0
                python = [f for f in t.frames if not f.native]
                threads.append(replace(t, frames=(*native[:first + 1], *python)))
            proc = replace(proc, threads=tuple(threads))
        procs.append(proc)
    return replace(snap, processes=tuple(procs), verdict=None, wait_graph=None)


@pytest.mark.parametrize("cut", [None, "libsqlite3", "libc"])
def test_the_indexer_waits_for_the_catalog_that_waits_for_it(cut: str | None) -> None:
    snap = load(DUMP)
    indexer = next(p.pid for p in snap.processes if any(
        f.name == "indexer" for t in p.threads for f in t.frames))
    judged = analyze(_cut(snap, indexer, cut == "libc") if cut else snap)
    verdict = judged.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert f"PID {indexer} (python) waits for the SQLite database lock on " in verdict.summary


def test_the_indexer_read_running_between_two_sleeps_still_waits_for_the_lock() -> None:
    """CI's extended tier under load: the indexer's stack in the busy handler's sleep, its
    state read R a moment later (the handler woke to try the lock again): the same wait."""
    snap = load(DUMP)
    indexer = next(p.pid for p in snap.processes if any(
        f.name == "indexer" for t in p.threads for f in t.frames))
    procs = tuple(replace(p, threads=tuple(replace(t, state="R") for t in p.threads))
                  if p.pid == indexer else p for p in snap.processes)
    verdict = analyze(replace(snap, processes=procs, verdict=None, wait_graph=None)).verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert f"PID {indexer} (python) waits for the SQLite database lock on " in verdict.summary
