"""A live view asks the Flight Recorder once: a Sampler writes to the ranks' debug-info pipes on
its first snapshot only, and later snapshots read what is on disk (real gloo job whose ranks
answer the pipe, tests/targets/gloo_fr_mismatch.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fr_job import gloo_fr_job
from support import poll

from hangscope.live.sampler import SampleOptions, Sampler

pytest.importorskip("torch")


@pytest.mark.quiet  # a 0.5 s window and the trigger's deadline: under load no group is read
def test_first_snapshot_triggers_later_ones_only_read(tmp_path: Path) -> None:
    with gloo_fr_job(tmp_path) as job:
        pipes = [job.pipe(r) for r in (0, 1)]

        def pokes() -> list[float]:
            return [p.stat().st_mtime for p in pipes]  # a write into a FIFO updates its mtime

        before = pokes()
        sampler = Sampler(job.launcher, SampleOptions(samples=2, window=0.5))
        first = sampler.snapshot()
        assert pokes() != before, "the first snapshot did not ask"
        (item,) = first.collectives
        assert item.fr_status in ("read", "timeout")
        poll(lambda: all(job.dump(r).exists() for r in (0, 1)), "both ranks' dumps on disk",
             timeout=60)
        asked = pokes()
        second = sampler.snapshot()
        assert pokes() == asked, "a later snapshot wrote to a pipe"
        (item,) = second.collectives
        assert item.fr_status == "read" and item.conclusions[0].kind == "mismatch"
        assert not any("requested through the debug-info pipe" in n for n in second.notes)
        assert job.process.poll() is None
