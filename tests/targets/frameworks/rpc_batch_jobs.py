"""A batch-update parameter server on real torch.distributed.rpc (TensorPipe over TCP), built as
pytorch/examples' "Batch RPC" is (distributed/rpc/batch/parameter_server.py): the server's
``update_and_fetch_model`` is an ``@rpc.functions.async_execution`` function that returns a
future, completed only once ``batch_update_size`` trainers have sent their gradients. Launched by
``torch.multiprocessing.spawn``, 3 processes: ``ps`` (rank 0) and trainers ``trainer1``,
``trainer2``, each trainer's loop run as a request the PS sends it (``rpc_async(run_trainer)``).

    python rpc_batch_jobs.py MODE READY_FILE WORKDIR PORT

Modes:

- ``uneven``  trainer1 has 6 batches, trainer2 only 5 (an uneven split of the data): the PS
              completes 5 updates; trainer1's 6th ``rpc_sync`` waits for a partner that never
              comes, its future never completed, and the PS waits on its trainers in
              ``torch.futures.wait_all`` (pytorch/examples#780, blind round 27's 05: "A call
              no server runs"; it read a wait chain ending at the PS's ``wait_all``).
- ``even``    the twin: both trainers loop for ever, every batch completed (progressing).
- ``pull``    the PyTorch parameter-server tutorial's shape: the PS's main thread goes straight
              into ``rpc.shutdown()``, a graceful barrier it serves from, while the trainers'
              own loops ``rpc_sync`` the PS's gradient updates, step after step (progressing;
              blind round 35's 03 read a wait chain ending at the PS's shutdown wait).

Ready lines (``"<pid> <tag>"``): ``ps`` once it has held trainer1's 6th gradient back (uneven)
or completed 5 updates (even); ``trainer1`` before its last call (uneven) or after 5 updates
(even); ``trainer2`` once its batches are done (uneven) or after 5 updates (even).
"""

from __future__ import annotations

import os
import sys
import threading

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

BATCH = 2  # gradients per update: one from each trainer


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


class BatchUpdateParameterServer:
    def __init__(self, ready_file: str, mode: str) -> None:
        self.weight = torch.zeros(4)
        self.lock = threading.Lock()
        self.future_model = torch.futures.Future()
        self.curr_update_size = 0
        self.calls = 0
        self.updates = 0
        self.ready_file, self.mode = ready_file, mode

    def update(self, grad):  # type: ignore[no-untyped-def]
        with self.lock:
            self.calls += 1
            self.weight += grad
            self.curr_update_size += 1
            fut = self.future_model
            if self.curr_update_size >= BATCH:
                self.curr_update_size = 0
                self.updates += 1
                fut.set_result(self.weight.clone())
                self.future_model = torch.futures.Future()
                if self.mode == "even" and self.updates == 5:
                    ready(self.ready_file, "ps")
            elif self.mode == "uneven" and self.calls == 11:  # trainer1's 6th: held back
                ready(self.ready_file, "ps")
            return fut


_PS: BatchUpdateParameterServer | None = None


@rpc.functions.async_execution
def update_and_fetch_model(grad):  # type: ignore[no-untyped-def]
    assert _PS is not None
    return _PS.update(grad)


def run_trainer(name: str, batches: int, ready_file: str, mode: str) -> None:
    """A trainer's loop, run on the trainer as the PS's request."""
    step = 0
    while mode == "even" or step < batches:
        if mode == "uneven" and name == "trainer1" and step == batches - 1:
            ready(ready_file, name)
        grad = torch.ones(4) * 0.01
        rpc.rpc_sync("ps", update_and_fetch_model, args=(grad,))
        step += 1
        if mode == "even" and step == 5:
            ready(ready_file, name)
    if name == "trainer2":
        ready(ready_file, name)


def worker(index: int, mode: str, ready_file: str, port: str) -> None:
    global _PS
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    torch.set_num_threads(1)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=3600,
                                              _transports=["uv"], _channels=["basic"])
    name = "ps" if index == 0 else f"trainer{index}"
    rpc.init_rpc(name, rank=index, world_size=3, rpc_backend_options=options)
    if mode == "pull":
        _pull(index, ready_file)
    elif index == 0:
        _PS = BatchUpdateParameterServer(ready_file, mode)
        # 88 samples in batches of 8: 11 batches, split 6 and 5 (uneven)
        futures = [rpc.rpc_async(f"trainer{i}", run_trainer,
                                 args=(f"trainer{i}", 6 if i == 1 else 5, ready_file, mode))
                   for i in (1, 2)]
        torch.futures.wait_all(futures)
    rpc.shutdown()


_UPDATES = [0]


def push_grad(grad: torch.Tensor) -> int:
    """The PS's update, run on its RPC threads at each trainer's call."""
    _UPDATES[0] += 1
    return _UPDATES[0]


def _pull(index: int, ready_file: str) -> None:
    if index == 0:
        ready(ready_file, "ps")
        return  # into rpc.shutdown(): it serves the trainers' calls until they are done
    for step in range(1 << 30):
        grad = torch.tanh(torch.ones(64, 64) * step).sum(0)[:4]
        rpc.rpc_sync("ps", push_grad, args=(grad,))
        if step == 5:
            ready(ready_file, f"trainer{index}")
        threading.Event().wait(0.1)


def main() -> None:
    mode, ready_file, _workdir, port = sys.argv[1:5]
    mp.spawn(worker, args=(mode, ready_file, port), nprocs=3, join=True)


if __name__ == "__main__":
    main()
