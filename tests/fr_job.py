"""The real 2-rank gloo job hung in mismatched collectives whose ranks answer a Flight Recorder
debug-info pipe (tests/targets/gloo_fr_mismatch.py), started for a test and killed after it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support import TARGETS, poll


@dataclass(frozen=True)
class FrJob:
    launcher: int
    ranks: tuple[int, int]  # PIDs of rank 0 and rank 1
    folder: Path  # where the pipes (frpipe_<rank>.pipe) and dumps (nccl_trace_rank_<rank>) are
    process: subprocess.Popen

    def pipe(self, rank: int) -> Path:
        return self.folder / f"frpipe_{rank}.pipe"

    def dump(self, rank: int) -> Path:
        return self.folder / f"nccl_trace_rank_{rank}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def gloo_fr_job(folder: Path) -> Iterator[FrJob]:
    """Start the job, wait (with a deadline) until both ranks hang and their pipes exist."""
    ready = folder / "ready"
    ready.mkdir()
    env = dict(os.environ, MASTER_PORT=str(_free_port()),
               TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(folder / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(folder / "nccl_trace_rank_"),
               TORCH_FR_BUFFER_SIZE="100")
    proc = subprocess.Popen([sys.executable, str(TARGETS / "gloo_fr_mismatch.py"), str(ready)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        poll(lambda: all((ready / n).exists() for n in ("launcher", "rank0", "rank1")),
             "both ranks to reach their hanging collective", timeout=120)
        poll(lambda: all((folder / f"frpipe_{r}.pipe").exists() for r in (0, 1)),
             "both ranks' debug-info pipes", timeout=60)
        r0, r1 = (int(p) for p in (ready / "launcher").read_text().split())
        yield FrJob(proc.pid, (r0, r1), folder, proc)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=30)
