"""A gRPC front end that hands each request to torch.multiprocessing model workers through
queues (the serving shape of blind round 31's 08, after the torch.multiprocessing "model
server" examples: a task queue the workers read, a result queue a collector thread reads):

    python mp_frontend.py MODE READY_FILE WORKDIR

- ``idle``: two spawned workers each loop on ``tasks.get()``; the front end's collector
  thread loops on ``results.get()`` and completes each request's future; a client asks twice,
  gets both answers and exits. Then nothing is asked: every reader waits at the head of its
  loop for its next item (healthy, idle: it read "deadlock", the collector reading the
  workers' pipe and the workers the front end's).
- ``idle_channel``: the same, its client (a gateway) keeping its channel open between its
  calls, one every 30 s: the front end holds the client's connection, no call on it.
- ``lost``: the same front end whose worker drops a request it cannot batch (it only answers
  full batches of 2); a client asks once: its call waits on the handler, the handler on its
  future, nobody will complete (hung: the request's worker holds it).

The front end appends ``"<pid> server"`` to READY_FILE once it serves, each worker
``"<pid> worker0"`` or ``"<pid> worker1"`` once its model is built, the client ``"<pid>
client"`` once its calls returned (``idle``) or were sent (``lost``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent import futures


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def worker(tasks, results, ready_file: str, mode: str,  # type: ignore[no-untyped-def]
           index: int) -> None:
    import torch

    model = torch.nn.Linear(8, 2)
    ready(ready_file, f"worker{index}")
    batch = []
    while True:
        rid, values = tasks.get()
        batch.append((rid, values))
        if mode == "lost" and len(batch) < 2:
            continue  # waits for a second request to fill the batch
        with torch.no_grad():
            out = model(torch.tensor([v for _, v in batch], dtype=torch.float32))
        for (r, _), row in zip(batch, out.tolist(), strict=True):
            results.put((r, row))
        batch = []


def serve(mode: str, ready_file: str) -> None:
    import grpc
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    tasks, results = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(tasks, results, ready_file, mode, i), daemon=True)
             for i in range(2)]
    for p in procs:
        p.start()
    pending: dict[int, futures.Future] = {}
    lock = threading.Lock()

    def collect() -> None:
        while True:
            rid, row = results.get()
            with lock:
                fut = pending.pop(rid)
            fut.set_result(row)

    threading.Thread(target=collect, name="result-collector", daemon=True).start()
    counter = iter(range(1 << 30))

    def infer(request, context):  # type: ignore[no-untyped-def]
        fut: futures.Future = futures.Future()
        with lock:
            rid = next(counter)
            pending[rid] = fut
        tasks.put((rid, request["x"]))
        return {"y": fut.result()}

    handler = grpc.method_handlers_generic_handler("model.Frontend", {
        "Infer": grpc.unary_unary_rpc_method_handler(
            infer, request_deserializer=json.loads,
            response_serializer=lambda o: json.dumps(o).encode())})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    subprocess.Popen([sys.executable, __file__, "client", ready_file, str(port), mode])
    ready(ready_file, "server")
    server.wait_for_termination()


def client(ready_file: str, port: str, mode: str) -> None:
    import grpc

    stub = grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary(
        "/model.Frontend/Infer", request_serializer=lambda o: json.dumps(o).encode(),
        response_deserializer=json.loads)
    if mode == "lost":
        ready(ready_file, "client")
        stub({"x": [0.5] * 8})  # never answered
        return
    for _ in range(2):
        stub({"x": [0.5] * 8})
    ready(ready_file, "client")
    while mode == "idle_channel":  # a gateway keeping its channel open between its calls
        time.sleep(30)
        stub({"x": [0.5] * 8})


if __name__ == "__main__":
    if sys.argv[1] == "client":
        client(*sys.argv[2:5])
    else:
        serve(sys.argv[1], sys.argv[2])
