"""A vLLM-shaped data-parallel engine over pyzmq and gloo: a front end and two engine
processes (spawned, no RANK: each engine joins its own gloo group of two, as vLLM's DP engines
do), the front end PUSHes to each engine's input PULL (ipc://) and reads their outputs from one
PULL. While a wave runs, each engine's step ends in an ``all_reduce`` of its unfinished count
over the group (vLLM's per-step DP sync).

    python zmq_dp.py MODE READY_FILE WORKDIR

- ``wave_gap``  the front end wakes engine 1 only (the wave's start excludes the engine that
                asked for it: vllm-project/vllm#39366, blind round 39's 01): engine 1 steps into
                the all_reduce, engine 0 stays in its input poll, and the front end waits for
                an output that never comes.
- ``wave_all``  the twin: both engines woken; they step together, each step's all_reduce
                matched, and the front end reads their outputs (progressing).

READY_FILE gets ``"<pid> <role>"``: ``engine0`` once in its loop, ``engine1`` once it steps,
``front`` just before its receive of the outputs (``wave_all``: once 40 came).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import sys
import time


def ready(path: str, role: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {role}\n")


def engine(index: int, ready_file: str, ipc: str, port: int) -> None:
    from datetime import timedelta

    import setproctitle
    import torch
    import torch.distributed as dist
    import zmq

    setproctitle.setproctitle(f"VLLM::EngineCore_DP{index}")  # as vLLM titles its engines
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=index,
                            world_size=2, timeout=timedelta(hours=1))
    ctx = zmq.Context()
    inputs = ctx.socket(zmq.PULL)
    inputs.bind(f"ipc://{ipc}/in{index}")
    outputs = ctx.socket(zmq.PUSH)
    outputs.connect(f"ipc://{ipc}/out")
    poller = zmq.Poller()
    poller.register(inputs, zmq.POLLIN)
    said = False
    while True:  # the engine's busy loop: wait for input while no wave runs
        if not said:
            said = True
            if index == 0:
                ready(ready_file, "engine0")
        for _sock, _ in poller.poll():
            inputs.recv_pyobj()
        for step in range(1 << 62):  # the wave: step, then agree on what is left
            if index == 1 and step == 0:
                ready(ready_file, "engine1")
            unfinished = torch.tensor([1])
            dist.all_reduce(unfinished)
            outputs.send_pyobj((index, step))
            time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    import zmq

    mode, ready_file, workdir = sys.argv[1:4]
    ipc = os.path.join(workdir, "ipc")
    os.makedirs(ipc, exist_ok=True)
    ctx = zmq.Context()
    outputs = ctx.socket(zmq.PULL)
    outputs.bind(f"ipc://{ipc}/out")
    port = free_port()
    engines = [mp.get_context("spawn").Process(target=engine, args=(i, ready_file, ipc, port),
                                               name=f"EngineCore_DP{i}") for i in range(2)]
    for proc in engines:
        proc.start()
    inputs = []
    for i in range(2):
        sock = ctx.socket(zmq.PUSH)
        sock.connect(f"ipc://{ipc}/in{i}")
        inputs.append(sock)
    for i in (1,) if mode == "wave_gap" else (0, 1):
        inputs[i].send_pyobj(("start_wave", 0))
    if mode == "wave_gap":
        ready(ready_file, "front")
    for got in range(1 << 62):
        outputs.recv_pyobj()  # wave_gap: never comes
        if got == 40:
            ready(ready_file, "front")


if __name__ == "__main__":
    main()
