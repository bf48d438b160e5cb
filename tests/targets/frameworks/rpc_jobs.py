"""Real torch.distributed.rpc (TensorPipe over TCP) under torchrun, 3 ranks: rank 0 a trainer,
ranks 1 and 2 parameter servers that each hold half of an embedding table.

    python -m torch.distributed.run --nproc-per-node 3 rpc_jobs.py MODE READY_FILE WORKDIR

Each server's ``lookup`` fetches the rows the other server holds with a nested ``rpc_sync``
(pytorch/pytorch#26362: "RPC deadlock when calling rpc_sync inside a UDF"). Modes:

- ``nested``  4 RPC threads per server (``num_worker_threads=4``) and 4 lookups in flight per
              server: every thread of both servers runs a lookup blocked in its nested call,
              whose request waits in the other server's queue for a thread that never comes
              free (blind round 26's 01). The trainer waits on its futures.
- ``nested_ok`` the twin: 16 RPC threads per server: every nested request finds a free thread,
              and the trainer steps again and again (progressing).

Each server appends ``"<pid> ps<N>"`` to READY_FILE once its 4 lookups of a step have started
their nested call; the trainer ``"<pid> trainer"`` once its lookups are sent (``nested_ok``:
after its third step).
"""

from __future__ import annotations

import os
import sys
import threading

LOOKUPS = 4  # in flight per server


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


_started = 0
_count_lock = threading.Lock()


def rows(ids: list[int]) -> list[float]:
    return [float(i) * 0.5 for i in ids]


def lookup(ids: list[int], other: str, ready_file: str, tag: str) -> list[float]:
    """Half of the rows here, the other half from the other server (the nested call)."""
    global _started
    import torch.distributed.rpc as rpc

    with _count_lock:
        _started += 1
        if _started == LOOKUPS:
            ready(ready_file, tag)
    theirs = rpc.rpc_sync(other, rows, args=(ids[1::2],))
    return rows(ids[0::2]) + theirs


def main() -> None:
    import torch.distributed.rpc as rpc

    mode, ready_file, _workdir = sys.argv[1:4]
    rank = int(os.environ["RANK"])
    threads = 4 if mode == "nested" else 16
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=threads, rpc_timeout=3600,
                                              _transports=["uv"], _channels=["basic"])
    name = "trainer" if rank == 0 else f"ps{rank}"
    rpc.init_rpc(name, rank=rank, world_size=3, rpc_backend_options=options)
    if rank == 0:
        step = 0
        while True:
            futures = [rpc.rpc_async(f"ps{1 + i % 2}", lookup, args=(
                list(range(8)), f"ps{2 - i % 2}", ready_file, f"ps{1 + i % 2}"))
                for i in range(2 * LOOKUPS)]
            if mode == "nested":
                ready(ready_file, "trainer")
            [f.wait() for f in futures]
            step += 1
            if mode == "nested_ok" and step == 3:
                ready(ready_file, "trainer")
    rpc.shutdown()


if __name__ == "__main__":
    main()
