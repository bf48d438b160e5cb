"""An RL trainer that updates an SGLang-shaped engine's weights over a gloo group of its own
(the engine's ``update_weights_from_distributed``: sgl-project/sgl-learning-materials#10,
sglang-omni#784; blind round 40's 01). The trainer (the main process) spawns the engine's
scheduler (titled ``sglang::scheduler_TP0``), both join a group of two from a thread, then the
trainer asks the scheduler over pyzmq (ipc://) to receive new weights: the scheduler replies
once it has received the tensors by ``broadcast(src=0)`` from the trainer.

    python zmq_weights.py MODE READY_FILE WORKDIR

- ``request_first``  the trainer awaits the reply (``zmq.asyncio``, ``run_until_complete``)
                     before it broadcasts: the scheduler waits in the broadcast for it.
- ``broadcast_too``  the twin: the trainer broadcasts while the reply is awaited, an update
                     every 0.2 s (progressing).

READY_FILE gets ``"<pid> scheduler"`` once the scheduler's loop runs and ``"<pid> trainer"``
once the trainer sent its (first) request (``broadcast_too``: its 10th).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import sys
import threading
import time
from datetime import timedelta

from zmq_dp import free_port, ready  # the same target helpers (this directory)


def scheduler(ready_file: str, ipc: str, port: int) -> None:
    import setproctitle
    import torch
    import torch.distributed as dist
    import zmq

    setproctitle.setproctitle("sglang::scheduler_TP0")  # as SGLang titles its scheduler
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1,
                            world_size=2, timeout=timedelta(hours=1))
    ctx = zmq.Context()
    requests = ctx.socket(zmq.PULL)
    requests.bind(f"ipc://{ipc}/scheduler")
    replies = ctx.socket(zmq.PUSH)
    replies.connect(f"ipc://{ipc}/trainer")
    ready(ready_file, "scheduler")
    weights = torch.zeros(16)
    while True:
        requests.recv_pyobj()  # update_weights_from_distributed
        dist.broadcast(weights, src=0)  # from the trainer, rank 0 of the group
        replies.send_pyobj("updated")


def main() -> None:
    import torch
    import torch.distributed as dist
    import zmq
    import zmq.asyncio

    mode, ready_file, workdir = sys.argv[1:4]
    ipc = os.path.join(workdir, "ipc")
    os.makedirs(ipc, exist_ok=True)
    port = free_port()
    ctx = zmq.asyncio.Context()
    replies = ctx.socket(zmq.PULL)
    replies.bind(f"ipc://{ipc}/trainer")
    requests = ctx.socket(zmq.PUSH)
    requests.connect(f"ipc://{ipc}/scheduler")
    mp.get_context("spawn").Process(target=scheduler, args=(ready_file, ipc, port)).start()
    joined = threading.Thread(target=dist.init_process_group, args=("gloo",), kwargs=dict(
        init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2,
        timeout=timedelta(hours=1)))
    joined.start()  # the group joined from a thread, as the engine joins it
    joined.join()
    loop = asyncio.new_event_loop()

    async def update(step: int) -> str:
        await requests.send_pyobj(("update_weights_from_distributed", step))
        if mode == "request_first" or step == 10:
            ready(ready_file, "trainer")
        if mode == "broadcast_too":  # the tensors go out while the reply is awaited
            await loop.run_in_executor(None, dist.broadcast, torch.ones(16), 0)
        return await replies.recv_pyobj()  # request_first: never comes

    for step in range(1, 1 << 62):
        loop.run_until_complete(update(step))
        time.sleep(0.2)


if __name__ == "__main__":
    main()
