"""A hot line of the program's own ``for`` loop computes; a ``while`` may spin, and one whose
body does nothing does (collect/loops.py, analyze/evidence/progress.py)."""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.progress import PROGRESSING, SLOW, STUCK, decide
from hangscope.analyze.evidence.progress_hints import Hints
from hangscope.collect.loops import code_loop_facts, loop_facts
from hangscope.model import NO_LOOP, SPIN, WALK, WHILE, VerdictKind
from hangscope.model.progress import CounterDelta, ProcessProgress, StackCount, ThreadProgress
from hangscope.model.serialize import load


def loop_kind_at(path: str | None, line: int | None) -> str | None:
    return loop_facts(path, line)[1]


def code_loop_kind_at(code: str, line: int | None) -> str | None:
    return code_loop_facts(code, line)[1]


CODE = """\
import itertools
def work(items):
    for item in items:
        digest = hash(item)
    while not ready():
        pass
    for _ in itertools.count():
        poll()
    for msg in iter(poll, None):
        handle(msg)
    for batch in batches:
        while pending(batch):
            step()
    while not state["ready"]:
        pass
    while not flag.is_set(): time.sleep(0)
    while busy():
        time.sleep(0.5)
"""


def test_the_innermost_loop_decides_and_endless_iterators_are_no_walk() -> None:
    assert code_loop_kind_at(CODE, 4) == WALK  # the body of a for over items
    assert code_loop_kind_at(CODE, 3) == WALK  # its header
    assert code_loop_kind_at(CODE, 6) == SPIN and code_loop_kind_at(CODE, 5) == SPIN
    assert code_loop_kind_at(CODE, 8) == WHILE  # itertools.count() never ends
    assert code_loop_kind_at(CODE, 10) == WHILE  # iter(poll, None): a poll
    assert code_loop_kind_at(CODE, 13) == WHILE  # a while inside a for: the while holds it
    assert code_loop_kind_at(CODE, 14) == SPIN and code_loop_kind_at(CODE, 15) == SPIN
    assert code_loop_kind_at(CODE, 16) == SPIN  # a yield of the core is no work
    assert code_loop_kind_at(CODE, 18) == WHILE  # a real sleep: a poll, judged by its wakes
    assert code_loop_kind_at(CODE, 2) == NO_LOOP  # read: in no loop (None is "unread")
    assert code_loop_kind_at("this is ( not python", 1) is None


def test_a_file_is_read_and_libraries_are_not(tmp_path: Path) -> None:
    path = tmp_path / "job.py"
    path.write_text(CODE)
    assert loop_kind_at(str(path), 4) == WALK and loop_kind_at(str(path), 6) == SPIN
    assert loop_kind_at("/usr/lib/python3.11/site-packages/x/y.py", 4) is None


def _hot(line: str) -> ProcessProgress:
    """One thread on a core the whole window, every sample on one line."""
    counters = CounterDelta(cpu_ns=1_900_000_000, runs=200, voluntary=3, involuntary=190)
    return ProcessProgress(7, (ThreadProgress(7, "MainThread", 190, (StackCount(
        ("<module> (job.py:20)", line), 190),), counters),), sampled=True)


def test_a_hot_line_computes_only_where_the_sample_says_it_walks_a_for_loop() -> None:
    walking = decide(_hot("work (job.py:4)"), 2.0, hints=Hints(iterating=frozenset({7})))
    assert walking.decision == PROGRESSING and walking.evidence == "source", walking.reason
    assert "for loop over items" in walking.reason
    unknown = decide(_hot("work (job.py:13)"), 2.0)
    assert unknown.decision == SLOW and "a spin or work" in unknown.reason, unknown.reason


def test_a_recorded_server_computing_on_one_line_of_a_for_loop_progresses() -> None:
    # tests/targets/loading_jobs.py's quantizer with its loop on one line (a `for` whose header
    # is never sampled apart from its body), recorded: the launcher polls /health, the
    # quantizer burns its core on that line. Seen in CI as "unknown" (a spin or work).
    snap = analyze(load(Path(__file__).resolve().parent.parent / "fixtures" / "healthy"
                        / "one_line_for.dump.json"))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.PROGRESSING, snap.verdict
    assert "computes on a core through a for loop's items" in snap.verdict.summary


def test_a_thread_going_round_a_loop_that_does_nothing_spins() -> None:
    # `while not state["ready"]: pass`: two lines in the samples, so the line "moves"; the
    # source says only another thread can end it
    proc = _hot("work (job.py:14)")
    thread = proc.threads[0]
    moving = ProcessProgress(7, (ThreadProgress(7, "MainThread", 190, (
        StackCount(("<module> (job.py:20)", "work (job.py:14)"), 120),
        StackCount(("<module> (job.py:20)", "work (job.py:15)"), 70)), thread.counters),),
        sampled=True)
    how = "goes round a loop whose body does nothing (only another thread can end it)"
    rank = decide(moving, 2.0, hints=Hints(spinning={7: how}))
    assert rank.decision == STUCK and how in rank.reason, rank.reason
    assert decide(moving, 2.0).decision == PROGRESSING  # without the source: a moving line


def test_a_recorded_loader_spinning_for_a_flag_is_named_in_the_verdict() -> None:
    # tests/targets/loading_jobs.py spin: the loader goes round `while not STATE["weights"]:
    # pass` beside the launcher's /health poll; recorded. Not progress, and the spinner is
    # where to look.
    snap = analyze(load(Path(__file__).resolve().parent.parent / "fixtures" / "healthy"
                        / "spin_flag.dump.json"))
    verdict = snap.verdict
    server = next(p.pid for p in snap.processes if p.title == "model_server")
    assert verdict is not None and verdict.kind is VerdictKind.UNKNOWN, verdict
    assert verdict.suspects == (server,), verdict
    assert f"PID {server} (model_server) is spin-waiting: the thread goes round a loop whose " \
        "body does nothing" in verdict.summary, verdict.summary
    assert "at await_weights (loading_jobs.py:51)" in verdict.summary, verdict.summary
