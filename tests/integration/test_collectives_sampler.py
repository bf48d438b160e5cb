"""A live view asks the Flight Recorder once: a Sampler writes to the ranks' debug-info pipes on
its first snapshot only, and later snapshots read what is on disk (real gloo job whose ranks
answer the pipe, tests/targets/gloo_fr_mismatch.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import TARGETS, poll

from hangscope.sampler import SampleOptions, Sampler

pytest.importorskip("torch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pokes(pipe: Path) -> float:
    return pipe.stat().st_mtime  # a write into a FIFO updates its mtime


def test_first_snapshot_triggers_later_ones_only_read(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    ready.mkdir()
    env = dict(os.environ, MASTER_PORT=str(_free_port()),
               TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "nccl_trace_rank_"),
               TORCH_FR_BUFFER_SIZE="100")
    job = subprocess.Popen([sys.executable, str(TARGETS / "gloo_fr_mismatch.py"), str(ready)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        poll(lambda: all((ready / n).exists() for n in ("launcher", "rank0", "rank1")),
             "both ranks to reach their hanging collective", timeout=120)
        pipes = [tmp_path / f"frpipe_{r}.pipe" for r in (0, 1)]
        poll(lambda: all(p.exists() for p in pipes), "both debug-info pipes", timeout=60)
        before = [_pokes(p) for p in pipes]
        sampler = Sampler(job.pid, SampleOptions(samples=2, window=0.5))
        first = sampler.snapshot()
        assert [_pokes(p) for p in pipes] != before, "the first snapshot did not ask"
        (item,) = first.collectives
        assert item.fr_status in ("read", "timeout")
        poll(lambda: all((tmp_path / f"nccl_trace_rank_{r}").exists() for r in (0, 1)),
             "both ranks' dumps on disk", timeout=60)
        asked = [_pokes(p) for p in pipes]
        second = sampler.snapshot()
        assert [_pokes(p) for p in pipes] == asked, "a later snapshot wrote to a pipe"
        (item,) = second.collectives
        assert item.fr_status == "read" and item.conclusions[0].kind == "mismatch"
        assert not any("requested through the debug-info pipe" in n for n in second.notes)
        assert job.poll() is None
    finally:
        os.killpg(job.pid, 9)
        job.wait(timeout=30)
