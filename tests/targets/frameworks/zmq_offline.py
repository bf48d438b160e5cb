"""An SGLang-shaped offline engine over pyzmq, run as ``python zmq_offline.py MODE READY_FILE
WORKDIR``: this process is the front end (a tokenizer manager on ``zmq.asyncio`` sockets, its
receive loop a task), with a scheduler and a detokenizer as spawned children over ``ipc://``.
The program calls the engine's synchronous ``generate`` once per prompt.

- ``per_call``: ``generate`` wraps each call in ``asyncio.run``, and the receive loop is
  started once, as a task of the first call's loop; that call returns, ``asyncio.run`` closes
  its loop and cancels the task, and the second call's reply comes back to a socket nobody
  receives from: it waits for ever (sglang#1606, "Fix generate hanging issue after the first
  call"; blind round 44's 01).
- ``one_loop``: the twin: one loop for every call (``run_until_complete``), the receive task
  alive on it; prompt after prompt (progressing).

READY_FILE gets ``"<pid> forwarded"`` from the detokenizer once it forwarded the second reply
(per_call), and ``"<pid> front"`` once three calls returned (one_loop).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def scheduler(ipc: str) -> None:
    import zmq

    ctx = zmq.Context()
    requests, out = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    requests.connect(f"ipc://{ipc}/scheduler_input")
    out.connect(f"ipc://{ipc}/detokenizer_input")
    while True:
        rid, prompt = requests.recv_pyobj()
        time.sleep(0.01)  # a forward pass
        out.send_pyobj((rid, [len(prompt), 7, 11]))


def detokenizer(ipc: str, ready_file: str) -> None:
    import zmq

    ctx = zmq.Context()
    tokens, out = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    tokens.bind(f"ipc://{ipc}/detokenizer_input")
    out.connect(f"ipc://{ipc}/tokenizer_output")
    forwarded = 0
    while True:
        rid, ids = tokens.recv_pyobj()
        out.send_pyobj((rid, " ".join(map(str, ids))))
        forwarded += 1
        if forwarded == 2:
            ready(ready_file, "forwarded")


class TokenizerManager:
    """The front end's side: sends requests, and a receive loop hands each reply to its
    request's event. The loop task is made once (``to_create_loop``), as SGLang's was."""

    def __init__(self, ipc: str) -> None:
        import zmq
        import zmq.asyncio

        self.ctx = zmq.asyncio.Context()
        self.send_to_scheduler = self.ctx.socket(zmq.PUSH)
        self.send_to_scheduler.bind(f"ipc://{ipc}/scheduler_input")
        self.recv_from_detokenizer = self.ctx.socket(zmq.PULL)
        self.recv_from_detokenizer.bind(f"ipc://{ipc}/tokenizer_output")
        self.states: dict[int, tuple[asyncio.Event, list[str]]] = {}
        self.to_create_loop = True
        self.rid = 0

    def auto_create_handle_loop(self) -> None:
        if not self.to_create_loop:
            return
        self.to_create_loop = False
        asyncio.get_running_loop().create_task(self.handle_loop())

    async def handle_loop(self) -> None:
        while True:
            rid, text = await self.recv_from_detokenizer.recv_pyobj()
            event, out = self.states[rid]
            out.append(text)
            event.set()

    async def generate_request(self, prompt: str) -> str:
        self.auto_create_handle_loop()
        self.rid += 1
        event, out = asyncio.Event(), []
        self.states[self.rid] = (event, out)
        await self.send_to_scheduler.send_pyobj((self.rid, prompt))
        await event.wait()
        return out[0]


class Engine:
    def __init__(self, ipc: str, mode: str) -> None:
        self.manager = TokenizerManager(ipc)
        self.loop = asyncio.new_event_loop() if mode == "one_loop" else None

    def generate(self, prompt: str) -> str:
        if self.loop is None:
            return asyncio.run(self.manager.generate_request(prompt))
        return self.loop.run_until_complete(self.manager.generate_request(prompt))


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    # a Unix socket path holds at most 107 bytes: a short directory, named for the test
    ipc = tempfile.mkdtemp(prefix="hs-zmqo-")
    with open(os.path.join(workdir, "ipc_dir"), "w") as f:
        f.write(ipc)
    ctx = mp.get_context("spawn")
    ctx.Process(target=detokenizer, args=(ipc, ready_file), daemon=True).start()
    ctx.Process(target=scheduler, args=(ipc,), daemon=True).start()
    engine = Engine(ipc, mode)
    done = 0
    while True:  # an eval script: one prompt after another
        print(engine.generate(f"question {done}"), flush=True)
        done += 1
        if done == 3:
            ready(ready_file, "front")


if __name__ == "__main__":
    main()
