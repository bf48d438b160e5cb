"""A reply that never comes, on a recorded real dump (tests/frameworks/test_zmq_engine.py's
``misroute`` job, tests/targets/frameworks/zmq_engine.py): tokenizer worker 1 waits inside a
synchronous ``generate`` (``run_until_complete``) for an abort the detokenizer routed to
worker 0, which logged "received output for unknown rid tw1-1, dropping" (sglang#33858); the
schedulers, the detokenizer and worker 0 wait for new work."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.serialize import from_dict

DUMP = Path(__file__).resolve().parent.parent / "fixtures" / "frameworks" / \
    "lost_reply.dump.json"


def _snapshot(keep_log: bool = True) -> Snapshot:
    snap = from_dict(json.loads(DUMP.read_text()))
    if not keep_log:  # the same job whose log said nothing (or went elsewhere)
        snap = replace(snap, processes=tuple(replace(p, log_tail=()) for p in snap.processes))
    return analyze(snap)


def _pid(snap: Snapshot, title: str) -> int:
    return next(p.pid for p in snap.processes if p.title == title)


def test_the_worker_waiting_inside_generate_is_the_suspect_and_the_log_is_quoted() -> None:
    snap = _snapshot()
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.summary.startswith("A reply that never comes"), verdict.summary
    assert verdict.suspects == (_pid(snap, "sglang::tokenizer_worker_1"),), verdict
    assert "unknown rid tw1-1, dropping" in verdict.summary, verdict.summary
    scheduler = _pid(snap, "sglang::scheduler_TP0")
    assert f"rank 0 (PID {scheduler}) and the detokenizer" in verdict.summary, verdict.summary
    assert "wait for new work, not blocked" in verdict.summary, verdict.summary


def test_without_the_dropped_line_the_waiting_worker_is_still_the_suspect() -> None:
    snap = _snapshot(keep_log=False)
    verdict = snap.verdict
    assert verdict is not None and verdict.summary.startswith("A reply that never comes"), \
        verdict
    assert verdict.suspects == (_pid(snap, "sglang::tokenizer_worker_1"),), verdict
    assert "the log says" not in verdict.summary and "dropping" not in verdict.summary, \
        verdict.summary
