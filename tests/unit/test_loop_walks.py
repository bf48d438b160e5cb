"""A hot line of the program's own ``for`` loop computes; a ``while`` may spin (collect/loops.py,
analyze/evidence/progress.py)."""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.progress import PROGRESSING, SLOW, decide
from hangscope.analyze.evidence.progress_hints import Hints
from hangscope.collect.loops import code_iterates_at, iterates_at
from hangscope.model import VerdictKind
from hangscope.model.progress import CounterDelta, ProcessProgress, StackCount, ThreadProgress
from hangscope.model.serialize import load

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
"""


def test_the_innermost_loop_decides_and_endless_iterators_are_no_walk() -> None:
    assert code_iterates_at(CODE, 4)  # the body of a for over items
    assert code_iterates_at(CODE, 3)  # its header
    assert not code_iterates_at(CODE, 6)  # a while re-checks
    assert not code_iterates_at(CODE, 8)  # itertools.count() never ends
    assert not code_iterates_at(CODE, 10)  # iter(poll, None): a poll
    assert not code_iterates_at(CODE, 13)  # a while inside a for: the while holds the line
    assert not code_iterates_at(CODE, 2)  # in no loop
    assert not code_iterates_at("this is ( not python", 1)


def test_a_file_is_read_and_libraries_are_not(tmp_path: Path) -> None:
    path = tmp_path / "job.py"
    path.write_text(CODE)
    assert iterates_at(str(path), 4) and not iterates_at(str(path), 6)
    assert not iterates_at("/usr/lib/python3.11/site-packages/x/y.py", 4)


def _hot(line: str) -> ProcessProgress:
    """One thread on a core the whole window, every sample on one line."""
    counters = CounterDelta(cpu_ns=1_900_000_000, runs=200, voluntary=3, involuntary=190)
    return ProcessProgress(7, (ThreadProgress(7, "MainThread", 190, (StackCount(
        ("<module> (job.py:20)", line), 190),), counters),), sampled=True)


def test_a_hot_line_computes_only_where_the_sample_says_it_walks_a_for_loop() -> None:
    walking = decide(_hot("work (job.py:4)"), 2.0, hints=Hints(iterating=frozenset({7})))
    assert walking.decision == PROGRESSING and walking.evidence == "source", walking.reason
    assert "for loop over items" in walking.reason
    spinning = decide(_hot("work (job.py:6)"), 2.0)
    assert spinning.decision == SLOW and "a spin or work" in spinning.reason, spinning.reason


def test_a_recorded_server_computing_on_one_line_of_a_for_loop_progresses() -> None:
    # tests/targets/loading_jobs.py's quantizer with its loop on one line (a `for` whose header
    # is never sampled apart from its body), recorded: the launcher polls /health, the
    # quantizer burns its core on that line. Seen in CI as "unknown" (a spin or work).
    snap = analyze(load(Path(__file__).resolve().parent.parent / "fixtures" / "healthy"
                        / "one_line_for.dump.json"))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.PROGRESSING, snap.verdict
    assert "computes on a core through a for loop's items" in snap.verdict.summary
