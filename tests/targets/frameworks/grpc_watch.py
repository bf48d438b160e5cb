"""A model registry served with grpcio: ``Watch`` streams each new version of a model to a
serving replica, ``Publish`` (unary) records a version and wakes the watchers:

    python grpc_watch.py MODE READY_FILE WORKDIR

The registry runs on ``ThreadPoolExecutor(max_workers=2)``; a replica opens a ``Watch`` stream
per model (two), then the trainer publishes.

- ``starved``: the two streams hold both workers, each waiting for a new version; the
  trainer's ``Publish`` waits in the pool's queue, and the version that would end the wait is
  the one it brings (grpc#7052; blind round 32's 03).
- ``quiet``: the twin that publishes nothing yet: the replica's streams wait for their first
  update, each on a worker of the two (healthy, idle).
- ``roomy``: the twin: four workers: ``Publish`` runs, the watchers stream each new version and
  wait for the next; the trainer publishes one model or the other every 0.1 s (healthy).

READY_FILE gets ``"<pid> registry"`` once it serves, ``"<pid> replica"`` once both streams got
their first version, ``"<pid> trainer"`` once its first ``Publish`` is sent (``starved``) or
answered (``roomy``).
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


def _dumps(o: object) -> bytes:
    return json.dumps(o).encode()


def registry(ready_file: str, workers: int) -> None:
    import grpc

    versions = {"ranker": 0, "retriever": 0}
    changed = threading.Condition()

    def watch(request, context):  # type: ignore[no-untyped-def]
        seen = -1
        while context.is_active():
            with changed:
                changed.wait_for(lambda last=seen: versions[request["model"]] != last)
                seen = versions[request["model"]]
            yield {"model": request["model"], "version": seen}

    def publish(request, context):  # type: ignore[no-untyped-def]
        with changed:
            versions[request["model"]] += 1
            changed.notify_all()
        return {"version": versions[request["model"]]}

    handler = grpc.method_handlers_generic_handler("models.Registry", {
        "Watch": grpc.unary_stream_rpc_method_handler(
            watch, request_deserializer=json.loads, response_serializer=_dumps),
        "Publish": grpc.unary_unary_rpc_method_handler(
            publish, request_deserializer=json.loads, response_serializer=_dumps)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with open(os.path.join(os.path.dirname(ready_file), "port"), "w") as f:
        f.write(str(port))
    ready(ready_file, "registry")
    server.wait_for_termination()


def _channel(ready_file: str):  # type: ignore[no-untyped-def]
    import grpc

    port_file = os.path.join(os.path.dirname(ready_file), "port")
    while not os.path.exists(port_file):
        time.sleep(0.05)
    return grpc.insecure_channel(f"127.0.0.1:{open(port_file).read()}")


def replica(ready_file: str) -> None:
    stream = _channel(ready_file).unary_stream(
        "/models.Registry/Watch", request_serializer=_dumps, response_deserializer=json.loads)
    first = threading.Barrier(3)

    def follow(model: str) -> None:
        for n, _update in enumerate(stream({"model": model})):
            if n == 0:
                first.wait()  # loaded the current version

    threads = [threading.Thread(target=follow, args=(m,), name=f"watch-{m}")
               for m in ("ranker", "retriever")]
    for t in threads:
        t.start()
    first.wait()
    ready(ready_file, "replica")
    for t in threads:
        t.join()


def trainer(ready_file: str, mode: str) -> None:
    publish = _channel(ready_file).unary_unary(
        "/models.Registry/Publish", request_serializer=_dumps, response_deserializer=json.loads)
    while "replica" not in open(ready_file).read():  # noqa: SIM115
        time.sleep(0.05)
    if mode == "quiet":  # nothing to publish yet: the trainer waits for its data
        ready(ready_file, "trainer")
        while True:
            time.sleep(3600)
    told = False
    for step in range(1 << 30):  # an epoch, then publish the new ranker, or retriever
        time.sleep(0.5 if mode == "starved" else 0.1)
        if mode == "starved" and not told:
            threading.Timer(0.5, ready, (ready_file, "trainer")).start()
            told = True
        publish({"model": ("ranker", "retriever")[step % 2]})
        if not told:
            ready(ready_file, "trainer")
            told = True


def main() -> None:
    mode, ready_file, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    me = [sys.executable, __file__]
    subprocess.Popen([*me, "registry", ready_file, "2" if mode == "starved" else "4"])
    subprocess.Popen([*me, "replica", ready_file])
    trainer(ready_file, mode)


if __name__ == "__main__":
    if sys.argv[1] == "registry":
        registry(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "replica":
        replica(sys.argv[2])
    else:
        main()
