"""Real gloo jobs of 2-4 ranks whose ranks write torch's own Flight Recorder dumps at a hang.

    python fr_gloo_cases.py CASE OUT_DIR

The launcher starts WORLD ranks (RANK/WORLD_SIZE in their environment, as torchrun does) with
``TORCH_FR_BUFFER_SIZE`` set, so torch 2.13's CPU build records every gloo collective. Each rank
runs CASE: correct collectives, then (in a hang case) the call it hangs in. When a rank reaches
its hang (or its end), it writes OUT_DIR/at<rank>; once every rank is there, a thread of each
rank writes ``_dump_fr_trace()`` to OUT_DIR/nccl_trace_rank_<rank> and ``_dump_fr_trace_json()``
to OUT_DIR/json/nccl_trace_rank_<rank>, exactly as ProcessGroupNCCL's monitor does on a
debug-info pipe, then every rank exits. tests/fixtures/record_fr_gloo.py runs every case.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

Case = Callable[[int, int, Path], None]


def _dump_when_all_there(rank: int, world: int, out: Path) -> None:
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

    deadline = time.monotonic() + 120
    while not all((out / f"at{r}").exists() for r in range(world)):
        if time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.05)
    time.sleep(1.0)  # the hanging collectives are enqueued: recorded before this
    (out / "json").mkdir(exist_ok=True)
    for path, data in ((out / f"nccl_trace_rank_{rank}", _dump_fr_trace()),
                       (out / "json" / f"nccl_trace_rank_{rank}", _dump_fr_trace_json())):
        path.with_suffix(".tmp").write_bytes(data)
        os.replace(path.with_suffix(".tmp"), path)
    (out / f"dumped{rank}").write_text("")
    while not all((out / f"dumped{r}").exists() for r in range(world)):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    os._exit(0)


def _at(rank: int, out: Path) -> None:
    (out / f"at{rank}").write_text(str(os.getpid()))


def _wait_forever() -> None:
    while True:
        time.sleep(60)


# --- the cases: each rank's program; `hang(rank, out)` marks where it blocks -------------

def ok_scatter_a2a(rank: int, world: int, out: Path) -> None:
    """A correct program: broadcast, scatter, gather, an uneven all_to_all_single, an
    all_gather into a list, a barrier. No mismatch anywhere."""
    import torch
    import torch.distributed as dist

    t = torch.ones(4)
    dist.broadcast(t, 0)
    dist.scatter(t, [torch.ones(4) for _ in range(world)] if rank == 0 else None, src=0)
    dist.gather(t, [torch.empty(4) for _ in range(world)] if rank == 0 else None, dst=0)
    send = [rank + j + 1 for j in range(world)]  # rank r sends r+j+1 elements to rank j
    recv = [j + rank + 1 for j in range(world)]
    dist.all_to_all_single(torch.empty(sum(recv)), torch.ones(sum(send)), recv, send)
    dist.all_gather([torch.empty(4) for _ in range(world)], t)
    dist.barrier()
    _at(rank, out)
    _wait_forever()


def wrong_op(rank: int, world: int, out: Path) -> None:
    """Rank 1 calls all_gather where the others call all_reduce."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1024)
    dist.all_reduce(t)
    _at(rank, out)
    if rank == 1:
        dist.all_gather([torch.empty(1024) for _ in range(world)], t)
    else:
        dist.all_reduce(t)


def lag_hides_mismatch(rank: int, world: int, out: Path) -> None:
    """3 ranks: rank 2 stops after collective #2; ranks 0 and 1 then disagree at #3."""
    import torch
    import torch.distributed as dist

    t = torch.ones(16)
    dist.all_reduce(t)
    dist.all_reduce(t)
    _at(rank, out)
    if rank == 2:
        _wait_forever()
    if rank == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, 0)


def subgroup_nonmember(rank: int, world: int, out: Path) -> None:
    """3 ranks: ranks 0 and 1 run 5 collectives in a subgroup rank 2 is not in; then rank 1
    never joins the job-wide all_reduce #3 that ranks 0 and 2 wait in."""
    import torch
    import torch.distributed as dist

    t = torch.ones(16)
    sub = dist.new_group([0, 1])
    dist.all_reduce(t)
    if rank in (0, 1):
        for _ in range(5):
            dist.all_reduce(t, group=sub)
    dist.all_reduce(t)
    _at(rank, out)
    if rank == 1:
        _wait_forever()
    dist.all_reduce(t)


def hashed_subgroup_behind(rank: int, world: int, out: Path) -> None:
    """3 ranks, a subgroup named by the hash of its ranks (use_local_synchronization): its
    pg_status is keyed by the group's uid, its entries by the hash. Rank 1 stays behind in it."""
    import torch
    import torch.distributed as dist

    t = torch.ones(16)
    dist.all_reduce(t)
    sub = dist.new_group([0, 1], use_local_synchronization=True) if rank in (0, 1) else None
    if rank in (0, 1):
        dist.all_reduce(t, group=sub)
        dist.all_reduce(t, group=sub)
    _at(rank, out)
    if rank == 0:
        dist.all_reduce(t, group=sub)
    _wait_forever()


def behind(rank: int, world: int, out: Path) -> None:
    """Rank 1 never calls collective #3; rank 0 waits in it."""
    import torch
    import torch.distributed as dist

    t = torch.ones(64)
    dist.all_reduce(t)
    dist.all_reduce(t)
    _at(rank, out)
    if rank == 0:
        dist.all_reduce(t)
    _wait_forever()


def wrapped_buffer(rank: int, world: int, out: Path) -> None:
    """A ring buffer of 8 entries that wrapped (30 collectives), then wrong ops at #31."""
    import torch
    import torch.distributed as dist

    t = torch.ones(8)
    for _ in range(30):
        dist.all_reduce(t)
    if rank == 1:
        time.sleep(0.2)  # rank 1's buffer still ends at #31 like rank 0's
    _at(rank, out)
    if rank == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, 0)


def wrong_dtype(rank: int, world: int, out: Path) -> None:
    """Rank 1 all_reduces int32 where rank 0 reduces float32: same count, same bytes, so gloo
    sums garbage without a word (sizes that differ are caught by its transport instead)."""
    import torch
    import torch.distributed as dist

    dist.all_reduce(torch.ones(4))
    _at(rank, out)
    dist.all_reduce(torch.ones(256, dtype=torch.int32 if rank == 1 else torch.float32))


CASES: dict[str, tuple[int, Case, str]] = {  # name -> (world size, program, buffer size)
    "ok_scatter_a2a": (3, ok_scatter_a2a, "100"),
    "wrong_op": (2, wrong_op, "100"),
    "wrong_op_4": (4, wrong_op, "100"),
    "wrong_dtype": (2, wrong_dtype, "100"),
    "lag_hides_mismatch": (3, lag_hides_mismatch, "100"),
    "subgroup_nonmember": (3, subgroup_nonmember, "100"),
    "hashed_subgroup_behind": (3, hashed_subgroup_behind, "100"),
    "behind": (2, behind, "100"),
    "wrapped_buffer": (2, wrapped_buffer, "8"),
}


def rank_main(case: str, out: Path) -> None:
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    threading.Thread(target=_dump_when_all_there, args=(rank, world, out), daemon=True).start()
    try:
        CASES[case][1](rank, world, out)
    except Exception as exc:  # gloo failed the collective (sizes differ): dump it all the same
        (out / f"error{rank}").write_text(repr(exc))
    _at(rank, out)
    _wait_forever()


def main() -> None:
    case, out = sys.argv[1], Path(sys.argv[2])
    if os.environ.get("RANK") is not None:
        rank_main(case, out)
        return
    world, _, buffer = CASES[case]
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=os.environ.get("MASTER_PORT", "29651"), TORCH_FR_BUFFER_SIZE=buffer)
    ranks = [subprocess.Popen([sys.executable, __file__, case, str(out)],
                              env={**env, "RANK": str(r)}) for r in range(world)]
    for proc in ranks:
        proc.wait()


if __name__ == "__main__":
    main()
