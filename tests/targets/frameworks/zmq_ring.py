"""An SGLang-shaped pipeline over pyzmq, three processes in a ring of PUSH/PULL sockets
(ipc://): the front (the tokenizer manager) PUSHes requests to the scheduler, the scheduler
PUSHes one output per request and step to the detokenizer, the detokenizer PUSHes each on to
the front. Every socket has a high-water mark of 16 messages (the default is 1,000; SGLang's
and vLLM's pipes set 0, unbounded).

    python zmq_ring.py MODE READY_FILE WORKDIR

- ``hwm_ring``     the front sends its whole batch before it reads any output (blind round
                   38's 01; mstar-project/mstar#217, ai-dynamo/aiperf#204: PUSH/PULL at the
                   high-water mark deadlock): its output PULL fills, the detokenizer blocks in
                   its send, stops reading, the scheduler blocks in its send, stops reading,
                   and the front's own send blocks: three sends, each waiting for the next.
- ``hwm_ring_last`` the same ring with a launcher that starts the scheduler and detokenizer
                   first and the front last, all three its children.
- ``hwm_drained``  the twin: a thread of the front reads the outputs while it sends (SGLang's
                   ``handle_loop``), a batch after batch: progressing.

READY_FILE gets ``"<pid> <role>"`` from each process once it runs its loop (the front: once
it starts sending; the drained front: once outputs came back).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading

HWM = 16
OUTPUTS = 3  # decode steps per request: one output each


def ready(path: str, role: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {role}\n")


def socket(kind: int, address: str, bind: bool):  # type: ignore[no-untyped-def]
    import zmq

    sock = zmq.Context.instance().socket(kind)
    sock.setsockopt(zmq.SNDHWM, HWM)
    sock.setsockopt(zmq.RCVHWM, HWM)
    sock.bind(address) if bind else sock.connect(address)
    return sock


def scheduler(ready_file: str, ipc: str) -> None:
    import zmq

    requests = socket(zmq.PULL, f"ipc://{ipc}/scheduler", bind=True)
    outputs = socket(zmq.PUSH, f"ipc://{ipc}/detokenizer", bind=False)
    ready(ready_file, "scheduler")
    while True:
        rid = requests.recv_pyobj()
        for step in range(OUTPUTS):
            outputs.send_pyobj((rid, step))


def detokenizer(ready_file: str, ipc: str) -> None:
    import zmq

    tokens = socket(zmq.PULL, f"ipc://{ipc}/detokenizer", bind=True)
    texts = socket(zmq.PUSH, f"ipc://{ipc}/front", bind=False)
    ready(ready_file, "detokenizer")
    while True:
        rid, step = tokens.recv_pyobj()
        texts.send_pyobj(f"{rid}:{step}")


def front(mode: str, ready_file: str, ipc: str) -> None:
    import zmq

    texts = socket(zmq.PULL, f"ipc://{ipc}/front", bind=True)
    requests = socket(zmq.PUSH, f"ipc://{ipc}/scheduler", bind=False)
    children = [mp.get_context("spawn").Process(target=target, args=(ready_file, ipc))
                for target in (scheduler, detokenizer)]
    for child in children if mode != "hwm_ring_last" else ():
        child.start()
    if mode in ("hwm_ring", "hwm_ring_last"):
        ready(ready_file, "front")
        for rid in range(100_000):  # the whole batch first, the outputs after
            requests.send_pyobj(rid)
        while True:
            texts.recv_pyobj()
    done = threading.Event()

    def drain() -> None:
        for got in range(1, 1 << 62):
            texts.recv_pyobj()
            if got == 200:
                done.set()

    threading.Thread(target=drain, daemon=True).start()
    rid = 0
    while True:
        requests.send_pyobj(rid)
        rid += 1
        if rid == 300 and done.wait(60):
            ready(ready_file, "front")


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    ipc = os.path.join(workdir, "ipc")
    os.makedirs(ipc, exist_ok=True)
    if mode == "hwm_ring_last":  # the engine's stages first, the front last, all children
        stages = [mp.get_context("spawn").Process(target=target, args=(ready_file, ipc))
                  for target in (scheduler, detokenizer)]
        stages.append(mp.get_context("spawn").Process(target=front,
                                                      args=(mode, ready_file, ipc)))
        for stage in stages:
            stage.start()
        for stage in stages:
            stage.join()
        return
    front(mode, ready_file, ipc)


if __name__ == "__main__":
    main()
