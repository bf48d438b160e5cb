"""Real torchrun jobs (2 gloo ranks) whose launcher's rendezvous keep-alive timer thread waits
between its beats, as it always does.

    python keepalive_jobs.py MODE READY_FILE WORKDIR

torchrun's agent keeps a ``RendezvousKeepAliveTimer`` thread that waits in ``Event.wait``
between beats. Each rank appends ``"<pid> rank<N>"`` to READY_FILE before its last call. Modes:

- ``died``   rank 1's loader thread dies (ValueError on a bad record) before it puts a batch;
             rank 1's main thread waits in ``Queue.get`` for it, rank 0 in all_reduce for rank 1
             (hung: rank 1 is the cause, the keep-alive timer a helper).
- ``steady`` both ranks all_reduce a batch their loader thread puts, in a loop (healthy).
"""

from __future__ import annotations

import datetime
import os
import queue
import subprocess
import sys
import threading
import time

from hang_shapes import ready


def load(batches: queue.Queue[list[float]], mode: str) -> None:
    record = "7" if mode == "steady" else "x"
    while True:
        batches.put([float(record)])  # a bad record: ValueError, the thread dies
        time.sleep(0.01)


def rank_main(mode: str, ready_file: str) -> None:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    rank = dist.get_rank()
    value = torch.ones(2)
    dist.all_reduce(value)  # everyone joined
    batches: queue.Queue[list[float]] = queue.Queue()
    threading.Thread(target=load, args=(batches, mode if rank == 1 else "steady"),
                     name="loader", daemon=True).start()
    ready(ready_file, f"rank{rank}")
    while True:
        value += torch.tensor(batches.get()).sum()
        dist.all_reduce(value)


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(sys.argv[2], sys.argv[3])
    else:
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0",
                        os.path.abspath(__file__), "--rank", sys.argv[1], sys.argv[2]],
                       check=False)
