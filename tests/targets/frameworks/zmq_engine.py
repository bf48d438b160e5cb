"""A serving engine over pyzmq built the way SGLang is: the main process runs the HTTP server
(FastAPI on uvicorn) and the tokenizer manager; one scheduler per TP rank
(``sglang::scheduler_TP0``, ``_TP1``) and a detokenizer (``sglang::detokenizer``) are its
children, all joined by ZMQ PUSH/PULL over ipc:// sockets:

    HTTP -> tokenizer manager --PUSH--> scheduler TP0 --PUSH--> scheduler TP1
                 ^                            |  <--PUSH-- (TP1's step done)
                 +---PUSH--- detokenizer <--PUSH--+

    python zmq_engine.py MODE READY_FILE WORKDIR

Modes (each from a real report):

- ``idle``: started, no request: an engine waiting for work. Healthy (hangscope's issue 34:
  an idle engine was called stuck, and ``watch`` raised a false alarm at every quiet spell).
- ``stop_tp1``: scheduler TP1 is stopped (SIGSTOP, as a debugger or a cgroup freeze leaves
  it) on its first request; TP0 waits for its half of the step, the HTTP request and then
  ``/health`` never return (sgl-project/sglang#27949: "after 2-3 successful chat completions,
  all subsequent requests (including /health) time out"; #27221: one TP rank diverges and the
  others wait for it).
- ``busy``: requests keep coming and are answered. Healthy (progressing).

The test sends the requests from its own client process, outside the job: a visitor.
Each process appends ``"<pid> <tag>"`` to READY_FILE once it waits in its loop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time

import setproctitle
import zmq


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _compute(seconds: float) -> None:
    """A forward pass stands for itself: CPU for ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(i * i for i in range(2000))


def scheduler(rank: int, mode: str, ipc: str, ready_file: str) -> None:
    setproctitle.setproctitle(f"sglang::scheduler_TP{rank}")
    ctx = zmq.Context()
    if rank == 0:
        recv_from_tokenizer = ctx.socket(zmq.PULL)
        recv_from_tokenizer.bind(f"ipc://{ipc}/tokenizer_to_scheduler")
        to_tp1 = ctx.socket(zmq.PUSH)
        to_tp1.bind(f"ipc://{ipc}/tp0_to_tp1")
        from_tp1 = ctx.socket(zmq.PULL)
        from_tp1.bind(f"ipc://{ipc}/tp1_to_tp0")
        to_detokenizer = ctx.socket(zmq.PUSH)
        to_detokenizer.connect(f"ipc://{ipc}/scheduler_to_detokenizer")
        ready(ready_file, "scheduler0")
        while True:  # event_loop_normal: take requests, run a batch, send the outputs
            req = recv_from_tokenizer.recv_pyobj()
            to_tp1.send_pyobj(req)
            _compute(0.02)
            from_tp1.recv_pyobj()  # the TP peer's half of the step
            to_detokenizer.send_pyobj({"rid": req["rid"], "tokens": [1, 2, 3]})
    else:
        from_tp0 = ctx.socket(zmq.PULL)
        from_tp0.connect(f"ipc://{ipc}/tp0_to_tp1")
        to_tp0 = ctx.socket(zmq.PUSH)
        to_tp0.connect(f"ipc://{ipc}/tp1_to_tp0")
        ready(ready_file, f"scheduler{rank}")
        while True:
            req = from_tp0.recv_pyobj()
            if mode == "stop_tp1":
                os.kill(os.getpid(), signal.SIGSTOP)
            _compute(0.02)
            to_tp0.send_pyobj({"rid": req["rid"]})


def detokenizer(ipc: str, ready_file: str) -> None:
    setproctitle.setproctitle("sglang::detokenizer")
    ctx = zmq.Context()
    recv_from_scheduler = ctx.socket(zmq.PULL)
    recv_from_scheduler.bind(f"ipc://{ipc}/scheduler_to_detokenizer")
    send_to_tokenizer = ctx.socket(zmq.PUSH)
    send_to_tokenizer.connect(f"ipc://{ipc}/detokenizer_to_tokenizer")
    ready(ready_file, "detokenizer")
    while True:
        out = recv_from_scheduler.recv_pyobj()
        send_to_tokenizer.send_pyobj({"rid": out["rid"], "text": "abc"})


def serve(ipc: str, ready_file: str, port_file: str) -> None:
    import uvicorn
    import zmq.asyncio
    from fastapi import FastAPI

    app = FastAPI()
    actx = zmq.asyncio.Context()
    send_to_scheduler = actx.socket(zmq.PUSH)
    send_to_scheduler.connect(f"ipc://{ipc}/tokenizer_to_scheduler")
    recv_from_detokenizer = actx.socket(zmq.PULL)
    recv_from_detokenizer.bind(f"ipc://{ipc}/detokenizer_to_tokenizer")
    waiting: dict[int, asyncio.Future[dict[str, object]]] = {}
    counter = iter(range(1 << 62))

    async def handle_loop() -> None:  # TokenizerManager.handle_loop
        while True:
            out = await recv_from_detokenizer.recv_pyobj()
            fut = waiting.pop(out["rid"], None)
            if fut is not None and not fut.done():
                fut.set_result(out)

    @app.on_event("startup")
    async def start() -> None:
        asyncio.get_running_loop().create_task(handle_loop())

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/generate")
    async def generate() -> dict[str, object]:
        rid = next(counter)
        fut: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
        waiting[rid] = fut
        await send_to_scheduler.send_pyobj({"rid": rid, "text": "hello"})
        return await fut

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.get_running_loop().create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        with open(port_file, "w") as f:
            f.write(str(port))
        ready(ready_file, "api")
        await task

    asyncio.run(run())


def main(mode: str, ready_file: str, workdir: str) -> None:
    # A short directory under /tmp, as SGLang's own ipc names are: a Unix socket path holds at
    # most 107 bytes, and pytest's tmp_path under xdist alone comes near that.
    ipc = tempfile.mkdtemp(prefix="hs-zmq-")
    with open(os.path.join(workdir, "ipc_dir"), "w") as f:
        f.write(ipc)
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=scheduler, args=(r, mode, ipc, ready_file)) for r in (0, 1)]
    procs.append(ctx.Process(target=detokenizer, args=(ipc, ready_file)))
    for p in procs:
        p.start()
    serve(ipc, ready_file, os.path.join(workdir, "port"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
