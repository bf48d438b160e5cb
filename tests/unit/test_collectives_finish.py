"""A snapshot never waits past the collectors' bound: a collector that never answers becomes a
note on both readings, within the wait."""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest

from hangscope.collect import collectives
from hangscope.model import nccl as ev


@pytest.mark.quiet  # a time is the assertion: run alone
def test_a_collector_that_never_answers_costs_the_wait_and_leaves_a_note() -> None:
    never: Future = Future()  # nobody will ever set it
    t0 = time.monotonic()
    ras, fr = collectives.finish(never, wait_s=0.2)
    assert time.monotonic() - t0 < 1.0
    assert (ras.status, fr.status) == (ev.TIMEOUT, ev.TIMEOUT)
    assert "did not finish within 0.2 s" in ras.note and fr.note.startswith("Flight Recorder:")

