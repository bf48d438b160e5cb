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
- ``slow``: scheduler TP0 computes for minutes on each request: a client waits on a busy
  backend. Healthy (progressing).
- ``drop_reply``: the detokenizer drops the first request's output with a log line; the HTTP
  front end's handler awaits its future forever, the client waits, every process of the
  engine idles (a reply lost inside the engine, as sglang#33858's).
- ``misroute``: SGLang's multi-tokenizer shape (``--tokenizer-worker-num 2``, sglang#6555):
  the launcher starts two tokenizer workers (``sglang::tokenizer_worker_0/1``) whose
  synchronous ``generate`` runs ``loop.run_until_complete(gather(...))`` as
  ``sglang.Engine.generate`` does. Worker 0's request is answered and it idles in
  ``run_forever``; worker 1 sends two, the second asking for no tokens: the scheduler aborts
  it with an ``AbortReq`` that carries no worker id, the detokenizer routes it to worker 0,
  which logs "received output for unknown rid tw1-1, dropping" (sglang#33858). Worker 1
  waits inside ``generate`` forever while every other process idles. Ready tags
  ``tokenizer0``, ``tokenizer1``, ``answered`` (worker 1's first reply), ``dropped``.

- ``no_receiver``: the front end creates its receive loop (``handle_loop``) lazily, on the
  first ``/generate``, as SGLang's ``auto_create_handle_loop`` does; a ``/server_info``
  request, the first, sends its message to the schedulers and awaits the reply, which the
  detokenizer sends back and no task receives (sgl-project/sglang#19475: ``get_internal_state``
  never created the loop; the server was started with ``--skip-server-warmup``).
- ``no_receiver_polled``: the same with a scheduler that idles in a timed poll
  (``poller.poll(1000)``, then looks again) between requests (blind round 40's 08: that poll
  and the detokenizer's receive read as a ring of zmq receives, a deadlock).

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


def _polled(sock: zmq.Socket) -> dict:  # type: ignore[type-arg]
    """The next request, waited for in a timed poll that looks again each second."""
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    while not poller.poll(1000):
        pass  # idle: look again in a second
    return sock.recv_pyobj()


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
            req = _polled(recv_from_tokenizer) if mode.endswith("_polled") else \
                recv_from_tokenizer.recv_pyobj()
            if req.get("max_new_tokens") == 0:
                log(f"scheduler: rid {req['rid']} asks for no tokens, aborting")
                # The bug of sglang#33858: the abort is built without the request's worker id
                # (AbortReq(rid) defaults it to 0), so the detokenizer routes it to worker 0.
                to_detokenizer.send_pyobj({"rid": req["rid"], "abort": "no tokens"})
                continue
            to_tp1.send_pyobj(req)
            _compute(600.0 if mode == "slow" else 0.02)
            from_tp1.recv_pyobj()  # the TP peer's half of the step
            to_detokenizer.send_pyobj({"rid": req["rid"], "worker": req.get("worker", 0),
                                       "tokens": [1, 2, 3]})
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


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def detokenizer(mode: str, ipc: str, ready_file: str) -> None:
    setproctitle.setproctitle("sglang::detokenizer")
    ctx = zmq.Context()
    recv_from_scheduler = ctx.socket(zmq.PULL)
    recv_from_scheduler.bind(f"ipc://{ipc}/scheduler_to_detokenizer")
    # One PUSH per tokenizer worker in the multi-tokenizer shape, one to the manager otherwise.
    names = [f"detokenizer_to_tokenizer_{w}" for w in (0, 1)] if mode == "misroute" else [
        "detokenizer_to_tokenizer"]
    send_to_tokenizer = [ctx.socket(zmq.PUSH) for _ in names]
    for sock, name in zip(send_to_tokenizer, names, strict=True):
        sock.connect(f"ipc://{ipc}/{name}")
    ready(ready_file, "detokenizer")
    dropped = False
    while True:
        out = recv_from_scheduler.recv_pyobj()
        if mode == "drop_reply" and not dropped:
            dropped = True
            log(f"detokenizer: no decode state for rid {out['rid']}, dropping its output")
            ready(ready_file, "dropped")
            continue
        worker = out.get("worker", 0) if len(send_to_tokenizer) > 1 else 0
        send_to_tokenizer[worker].send_pyobj({**out, "text": "abc"})
        if mode.startswith("no_receiver") and not dropped:
            dropped = True  # (the test's tag: the first reply went back)
            ready(ready_file, "replied")


def tokenizer_sockets(ipc: str, inbox: str) -> tuple[zmq.asyncio.Socket, zmq.asyncio.Socket]:
    """A tokenizer manager's asyncio sockets: a PUSH to the schedulers, a PULL bound at
    ``inbox`` for the detokenizer's outputs."""
    import zmq.asyncio

    actx = zmq.asyncio.Context()
    send_to_scheduler = actx.socket(zmq.PUSH)
    send_to_scheduler.connect(f"ipc://{ipc}/tokenizer_to_scheduler")
    recv_from_detokenizer = actx.socket(zmq.PULL)
    recv_from_detokenizer.bind(f"ipc://{ipc}/{inbox}")
    return send_to_scheduler, recv_from_detokenizer


def tokenizer_worker(w: int, ipc: str, ready_file: str) -> None:
    """A tokenizer worker with ``sglang.Engine``'s synchronous API: ``generate`` runs the
    requests' coroutines in ``run_until_complete``; a receive loop sets their futures."""
    setproctitle.setproctitle(f"sglang::tokenizer_worker_{w}")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    send_to_scheduler, recv_from_detokenizer = tokenizer_sockets(
        ipc, f"detokenizer_to_tokenizer_{w}")
    waiting: dict[str, asyncio.Future[dict[str, object]]] = {}

    async def handle_loop() -> None:
        while True:
            out = await recv_from_detokenizer.recv_pyobj()
            fut = waiting.pop(out["rid"], None)
            if fut is None:
                log(f"tokenizer worker {w}: received output for unknown rid {out['rid']}, "
                    "dropping")
                ready(ready_file, "dropped")
            elif not fut.done():
                fut.set_result(out)

    async def one(rid: str, tokens: int) -> dict[str, object]:
        fut: asyncio.Future[dict[str, object]] = loop.create_future()
        waiting[rid] = fut
        await send_to_scheduler.send_pyobj({"rid": rid, "worker": w, "max_new_tokens": tokens})
        out = await fut
        ready(ready_file, "answered" if w == 1 else "answered0")
        return out

    def generate(tokens: list[int]) -> list[dict[str, object]]:
        return loop.run_until_complete(asyncio.gather(
            *(one(f"tw{w}-{i}", n) for i, n in enumerate(tokens))))

    receiver = loop.create_task(handle_loop())
    if w == 0:
        generate([8])
        ready(ready_file, "tokenizer0")
        loop.run_forever()  # a server's loop: waits for the next request
    else:
        ready(ready_file, "tokenizer1")
        generate([8, 0])
    receiver.cancel()


def serve(mode: str, ipc: str, ready_file: str, port_file: str) -> None:
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()
    send_to_scheduler, recv_from_detokenizer = tokenizer_sockets(ipc, "detokenizer_to_tokenizer")
    waiting: dict[int, asyncio.Future[dict[str, object]]] = {}
    counter = iter(range(1 << 62))

    async def handle_loop() -> None:  # TokenizerManager.handle_loop
        while True:
            out = await recv_from_detokenizer.recv_pyobj()
            fut = waiting.pop(out["rid"], None)
            if fut is not None and not fut.done():
                fut.set_result(out)

    receiving: list[asyncio.Task[None]] = []

    def auto_create_handle_loop() -> None:  # TokenizerManager.auto_create_handle_loop
        if not receiving:
            receiving.append(asyncio.get_running_loop().create_task(handle_loop()))

    @app.on_event("startup")
    async def start() -> None:
        if not mode.startswith("no_receiver"):  # (created lazily, by /generate only)
            auto_create_handle_loop()

    @app.post("/server_info")
    async def server_info() -> dict[str, object]:
        # sglang#19475: get_internal_state never creates the receive loop
        rid = next(counter)
        fut: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
        waiting[rid] = fut
        await send_to_scheduler.send_pyobj({"rid": rid, "text": "internal state"})
        return await fut

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/generate")
    async def generate() -> dict[str, object]:
        auto_create_handle_loop()
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
    procs.append(ctx.Process(target=detokenizer, args=(mode, ipc, ready_file)))
    if mode == "misroute":
        procs += [ctx.Process(target=tokenizer_worker, args=(w, ipc, ready_file)) for w in (0, 1)]
    for p in procs:
        p.start()
    if mode == "misroute":
        for p in procs:  # the launcher of an offline engine: it waits for its children
            p.join()
        return
    serve(mode, ipc, ready_file, os.path.join(workdir, "port"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
