"""Siblings running the same code, one behind (analyze/patterns/siblings.py), the loops
a frame's line is in (collect/loops.py), and a ring of ZMQ receives (a lost message).

GIVEN blind round 14's 06 recorded (a TP scheduler PUBlished its first batch before TP worker
1's SUB joined; two ``python -c`` workers, rank 1 at its first receive, rank 0 inside its
steady-state loop; the scheduler waits for acks) THEN rank 1 is behind its sibling, not a
deadlock of the scheduler with rank 0. Without the loops (no source), nothing is said.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.collect.loops import code_loop_facts, loop_facts
from hangscope.model import VerdictKind
from hangscope.model.serialize import load


def loops_at(path: str | None, line: int | None) -> tuple[tuple[int, int], ...]:
    return loop_facts(path, line)[0]


def code_loops_at(code: str, line: int | None) -> tuple[tuple[int, int], ...]:
    return code_loop_facts(code, line)[0]


DUMP = Path(__file__).resolve().parent.parent / "fixtures" / "frameworks" / \
    "zmq_slow_joiner.dump.json"
CODE = "import x\nfirst = x.get()\nwhile True:\n    for i in range(3):\n        x.get()\n"


def test_the_loops_a_line_is_in_outermost_first(tmp_path: Path) -> None:
    assert code_loops_at(CODE, 2) == ()
    assert code_loops_at(CODE, 5) == ((3, 5), (4, 5))
    assert code_loops_at("this is ( not python", 1) == ()
    path = tmp_path / "job.py"
    path.write_text(CODE)
    assert loops_at(str(path), 5) == ((3, 5), (4, 5))
    assert loops_at("/usr/lib/python3.11/queue.py", 5) == ()  # a library's loops are its own


def test_a_worker_that_never_reached_its_siblings_loop_is_behind() -> None:
    snap = analyze(load(DUMP))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    late = next(p for p in snap.processes if p.working_thread is not None
                and any(f.line == 9 and f.file == "<string>" for f in p.working_thread.frames))
    assert verdict.suspects == (late.pid,)
    assert verdict.summary.startswith(f"Behind its siblings: PID {late.pid} "), verdict.summary
    assert "before the loop at lines 11-13" in verdict.summary


def test_without_the_loops_no_sibling_is_said_to_be_behind() -> None:
    raw = load(DUMP)
    bare = replace(raw, processes=tuple(replace(p, threads=tuple(
        replace(t, frames=tuple(replace(f, loops=()) for f in t.frames)) for t in p.threads))
        for p in raw.processes))
    verdict = analyze(bare).verdict
    assert verdict is not None and not verdict.summary.startswith("Behind"), verdict


def test_a_ring_of_zmq_receives_is_a_lost_message_not_a_callback() -> None:
    # Blind round 13's 09 recorded (libzmq#2826): the coordinator PUBlished before either
    # worker's SUB joined; it waits on its PULL for results, both workers on their SUB.
    snap = analyze(load(DUMP.parent / "zmq_lost_publish.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert "waits for a message on Unix socket" in verdict.summary, verdict.summary
    assert "none of them sends before it receives" in verdict.summary, verdict.summary
    assert "calls it back" not in verdict.summary
    coordinator = next(p.pid for p in snap.processes if p.ppid not in
                       {q.pid for q in snap.processes})
    assert verdict.suspects == (coordinator,), verdict
