"""A 2-rank gloo job hung in mismatched collectives, whose ranks answer a debug-info pipe.

    python gloo_fr_mismatch.py READY_DIR

The launcher starts two ranks (RANK/WORLD_SIZE in their environment, as torchrun does). Each
does one warm-up all_reduce, then rank 0 calls all_reduce and rank 1 all_gather: both hang.
torch's CPU build records gloo collectives in its Flight Recorder but has no debug-info pipe
(ProcessGroupNCCL's monitor thread reads it, and that class is not built without CUDA), so each
rank here does what that thread does: it makes ``$TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe``
and, on any byte written into it, writes torch's own dump (``_dump_fr_trace``) to
``$TORCH_FR_DUMP_TEMP_FILE<rank>``. Each rank writes READY_DIR/rank<N> just before its hanging
collective; the launcher writes READY_DIR/launcher when both ranks run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path


def _answer_pipe(rank: int) -> None:
    from torch._C._distributed_c10d import _dump_fr_trace

    pipe = f"{os.environ['TORCH_NCCL_DEBUG_INFO_PIPE_FILE']}{rank}.pipe"
    out = f"{os.environ['TORCH_FR_DUMP_TEMP_FILE']}{rank}"
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDWR)  # read-write: a reader that blocks until bytes come
    while os.read(fd, 128):
        data = _dump_fr_trace()
        with open(out + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(out + ".tmp", out)


def rank_main(ready: Path) -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    t = torch.ones(1024)
    dist.all_reduce(t)  # collective #1: both ranks
    threading.Thread(target=_answer_pipe, args=(rank,), daemon=True).start()
    (ready / f"rank{rank}").write_text(str(os.getpid()))
    if rank == 0:
        dist.all_reduce(t)  # collective #2 on rank 0 ...
    else:
        dist.all_gather([torch.empty(1024), torch.empty(1024)], t)  # ... and on rank 1


def main() -> None:
    ready = Path(sys.argv[1])
    if os.environ.get("RANK") is not None:
        rank_main(ready)
        return
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=os.environ.get("MASTER_PORT", "29611"))
    ranks = [subprocess.Popen([sys.executable, __file__, str(ready)], env={**env, "RANK": str(r)})
             for r in range(2)]
    (ready / "launcher").write_text(" ".join(str(p.pid) for p in ranks))
    for proc in ranks:
        proc.wait()


if __name__ == "__main__":
    main()
