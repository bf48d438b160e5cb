"""``hangscope watch`` judges a quiet spell once (an idle server is checked and found not
hung), and judges the next one anew once the job has moved in between: the engine that
served, then stopped in the very wait it idled in, is a new stall (a real vLLM server: the
EngineCore stopped between two requests, tests/frameworks/test_vllm.py)."""

from __future__ import annotations

import os

from hangscope.live.watch import Watch, WatchOptions

IDLE = ("run_busy_loop (core.py:1551)", "get (queue.py:171)")
SERVING = ("run_busy_loop (core.py:1551)", "step (core.py:400)")


def _watch() -> tuple[Watch, list[frozenset[tuple[int, tuple[str, ...]]]]]:
    watch = Watch(os.getpid(), WatchOptions(after=3.0, interval=1.0))
    judged: list[frozenset[tuple[int, tuple[str, ...]]]] = []

    def capture(why: str, shape: frozenset[tuple[int, tuple[str, ...]]]) -> bool:
        judged.append(shape)  # as the real capture does when the verdict says not hung
        watch._checked = shape
        return False

    watch._capture = capture  # type: ignore[method-assign]
    return watch, judged


def _pulses(watch: Watch, start: float, count: int, wait: tuple[str, ...] | None) -> float:
    for _ in range(count):
        watch.stall.feed(start, start + 1.0, {7: wait})
        watch._judge()
        start += 1.0
    return start


def test_given_a_quiet_spell_judged_not_hung_then_it_is_not_judged_again_while_still() -> None:
    watch, judged = _watch()
    _pulses(watch, 0.0, 10, IDLE)
    assert len(judged) == 1


def test_given_the_job_moved_after_a_check_then_the_same_stall_is_judged_again() -> None:
    watch, judged = _watch()
    now = _pulses(watch, 0.0, 5, IDLE)
    assert len(judged) == 1
    now = _pulses(watch, now, 3, None)  # it served: no wait
    _pulses(watch, now, 5, IDLE)  # stopped where it idled
    assert len(judged) == 2 and judged[0] == judged[1]


def test_given_a_moment_of_work_shorter_than_a_stall_then_no_judgement_until_the_next() -> None:
    watch, judged = _watch()
    now = _pulses(watch, 0.0, 5, IDLE)
    now = _pulses(watch, now, 1, SERVING)  # another wait, briefly
    now = _pulses(watch, now, 1, IDLE)  # back: its clock starts again, not yet a stall
    assert len(judged) == 1
    _pulses(watch, now, 4, IDLE)
    assert len(judged) == 2
