"""A gRPC client whose done-callbacks chain a second call, and the server:

    python grpc_callback.py MODE READY_FILE WORKDIR

The client sends ``Lookup`` with ``.future()`` and, in each lookup's done-callback, starts a
``Normalize`` call and needs its result.

- ``blocking``: the callback waits in the second future's ``.result()``: callbacks run on the
  channel's thread, the only one that delivers the response it waits for (grpc#21716; blind
  round 35's 02). The main thread waits for an Event the callbacks would set.
- ``chained``: the twin: the callback chains the second call with ``add_done_callback`` and
  returns; batch after batch completes (progressing).

READY_FILE gets ``"<pid> server"`` once it serves and ``"<pid> client"`` once its first
batch is sent (``blocking``) or done (``chained``).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures

from server_client import dumps as _dumps
from server_client import ready, run


def server(ready_file: str, port_file: str) -> None:
    import grpc

    def echo(request, context):  # type: ignore[no-untyped-def]
        return {"value": request["value"]}

    handler = grpc.method_handlers_generic_handler("emb.Embed", {
        name: grpc.unary_unary_rpc_method_handler(
            echo, request_deserializer=json.loads, response_serializer=_dumps)
        for name in ("Lookup", "Normalize")})
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    grpc_server.add_generic_rpc_handlers((handler,))
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    with open(port_file, "w") as f:
        f.write(str(port))
    ready(ready_file, "server")
    grpc_server.wait_for_termination()


def client(ready_file: str, port_file: str, mode: str) -> None:
    import grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{open(port_file).read()}")  # noqa: SIM115
    lookup, normalize = (channel.unary_unary(f"/emb.Embed/{name}", request_serializer=_dumps,
                                             response_deserializer=json.loads)
                         for name in ("Lookup", "Normalize"))
    for batch in range(1 << 30):
        done, left = threading.Event(), [4]

        def finish(_future: object, done: threading.Event = done, left: list[int] = left) -> None:
            left[0] -= 1
            if left[0] == 0:
                done.set()

        def on_lookup(future, finish=finish):  # type: ignore[no-untyped-def]
            second = normalize.future({"value": future.result()["value"]})
            if mode == "blocking":
                second.result()  # on the channel's thread: waits for itself
                finish(second)
            else:
                second.add_done_callback(finish)

        for n in range(4):
            lookup.future({"value": n}).add_done_callback(on_lookup)
        if mode == "blocking" and batch == 0:
            threading.Timer(1.0, ready, (ready_file, "client")).start()
        done.wait()
        if batch == 0:
            ready(ready_file, "client")
        time.sleep(0.05)


if __name__ == "__main__":
    run(__file__, server, client)
