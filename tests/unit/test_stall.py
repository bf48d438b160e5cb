"""The stall clock of ``hangscope watch`` (analyze/stall.py): when a wait becomes a hang."""

from __future__ import annotations

from hangscope.analyze.stall import StallClock

WAIT = ("train (t.py:9)", "all_reduce (torch/distributed/distributed_c10d.py:3252)")
OTHER = ("train (t.py:9)", "barrier (torch/distributed/distributed_c10d.py:4800)")


def test_a_wait_that_lasts_after_seconds_is_a_stall() -> None:
    clock = StallClock(after=20)
    for t in range(0, 25, 5):
        clock.feed(t, t + 5, {1: WAIT, 2: WAIT})
    assert clock.stalled() and clock.stalled_for() == 25
    assert clock.shape() == {(1, WAIT), (2, WAIT)}


def test_a_pause_shorter_than_after_resets_when_the_wait_ends() -> None:
    clock = StallClock(after=20)
    for t in (0, 5, 10):  # a 15 s checkpoint: rank 2 waits in a barrier
        clock.feed(t, t + 5, {1: None, 2: OTHER})
    clock.feed(15, 20, {1: None, 2: None})  # training again
    assert not clock.stalled() and clock.stalled_for() == 0


def test_another_wait_starts_its_own_clock() -> None:
    clock = StallClock(after=20)
    clock.feed(0, 15, {1: OTHER})
    clock.feed(15, 20, {1: WAIT})
    assert clock.stalled_for() == 5


def test_a_healthy_helper_does_not_hide_a_stalled_rank() -> None:
    clock = StallClock(after=10)
    for t in range(0, 15, 5):
        clock.feed(t, t + 5, {1: WAIT, 99: None})  # 99: a heartbeat that always moves
    assert clock.stalled() and clock.longest() is not None and clock.longest().pid == 1


def test_moved_since_a_hang_when_every_waiter_left_its_wait() -> None:
    clock = StallClock(after=10)
    for t in range(0, 15, 5):
        clock.feed(t, t + 5, {1: WAIT, 2: WAIT})
    shape = clock.shape()
    clock.feed(15, 20, {1: None, 2: WAIT})
    assert not clock.moved_since(shape)
    clock.feed(20, 25, {1: None, 2: None})
    assert clock.moved_since(shape)
