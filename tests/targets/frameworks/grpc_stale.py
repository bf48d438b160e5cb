"""A reward server served with grpcio and two rollout workers that score with it:

    python grpc_stale.py MODE READY_FILE WORKDIR

The launcher starts the server on a fresh port, writes its address to ``WORKDIR/addr`` and
starts two workers, which read the address and call ``Score`` (unary) with
``wait_for_ready=True`` and no deadline.

- ``stale``: the workers read an address file a server of an earlier phase left behind (a
  port nobody listens on now) before the new server writes its own: each call waits for a
  connection gRPC retries for ever (grpc#19973, grpc#26320, mill#4018; blind round 34's 08).
- ``slow``: the twin: the workers dial the live server, whose handler takes an hour to score:
  each call is connected and waits for its answer (not a call connected to nobody).

READY_FILE gets ``"<pid> server"`` once it serves and ``"<pid> worker"`` from each worker once
its call is sent (it then blocks in it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures


def ready(path: str, tag: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {tag}\n")


def _dumps(o: object) -> bytes:
    return json.dumps(o).encode()


def server(ready_file: str, port: int) -> None:
    import grpc

    def score(request, context):  # type: ignore[no-untyped-def]
        time.sleep(3600)  # a reward model that takes its time
        return {"score": len(request["text"])}

    handler = grpc.method_handlers_generic_handler("reward.Reward", {
        "Score": grpc.unary_unary_rpc_method_handler(
            score, request_deserializer=json.loads, response_serializer=_dumps)})
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    grpc_server.add_generic_rpc_handlers((handler,))
    grpc_server.add_insecure_port(f"127.0.0.1:{port}")
    grpc_server.start()
    ready(ready_file, "server")
    grpc_server.wait_for_termination()


def worker(ready_file: str, addr_file: str) -> None:
    import grpc

    with open(addr_file) as f:
        addr = f.read().strip()
    call = grpc.insecure_channel(addr).unary_unary(
        "/reward.Reward/Score", request_serializer=_dumps, response_deserializer=json.loads)
    threading.Timer(1.0, ready, (ready_file, "worker")).start()  # the call is sent by then
    call({"text": "a rollout"}, wait_for_ready=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    addr_file = os.path.join(workdir, "addr")
    me = [sys.executable, __file__]
    port = _free_port()
    if mode == "stale":  # the last phase's server, stopped since: its port is free again
        old = next(p for p in iter(_free_port, None) if p != port)
        with open(addr_file, "w") as f:
            f.write(f"127.0.0.1:{old}")
    subprocess.Popen([*me, "server", ready_file, str(port)])
    while not os.path.exists(ready_file) or "server" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.05)
    if mode == "slow":
        with open(addr_file, "w") as f:
            f.write(f"127.0.0.1:{port}")
    workers = [subprocess.Popen([*me, "worker", ready_file, addr_file]) for _ in range(2)]
    for w in workers:
        w.wait()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
