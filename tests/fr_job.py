"""The real 2-rank gloo job hung in mismatched collectives whose ranks answer a Flight Recorder
debug-info pipe (tests/targets/gloo_fr_mismatch.py), started for a test and killed after it."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support import TARGETS, asleep, running_target


@dataclass(frozen=True)
class FrJob:
    launcher: int
    ranks: tuple[int, int]  # PIDs of rank 0 and rank 1
    folder: Path  # where the pipes (frpipe_<rank>.pipe) and dumps (nccl_trace_rank_<rank>) are
    process: subprocess.Popen[bytes]

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
    env = dict(MASTER_PORT=str(_free_port()),
               TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(folder / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(folder / "nccl_trace_rank_"),
               TORCH_FR_BUFFER_SIZE="100")

    def hung(_: object) -> bool:  # both ranks in their hanging collective, their pipes made
        # A rank writes its ready file just before its collective: asleep, it is inside it.
        return (all((ready / n).exists() for n in ("launcher", "rank0", "rank1"))
                and all((folder / f"frpipe_{r}.pipe").exists() for r in (0, 1))
                and all(asleep(int((ready / f"rank{r}").read_text() or 0)) for r in (0, 1)))

    with running_target([sys.executable, str(TARGETS / "gloo_fr_mismatch.py"), str(ready)],
                        folder, ready=hung, env=env, timeout=180) as target:
        r0, r1 = (int(p) for p in (ready / "launcher").read_text().split())
        yield FrJob(target.launcher, (r0, r1), folder, target.popen)
