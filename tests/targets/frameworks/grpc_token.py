"""A gRPC client whose call credentials' plugin refreshes its token, and the server:

    python grpc_token.py MODE READY_FILE WORKDIR

The client's channel carries ``grpc.metadata_call_credentials`` of a bearer-token plugin (on
``local_channel_credentials``, as call credentials need a secure channel); each ``Lookup``
first gets its metadata from the plugin, which gRPC runs on a thread of its own per call.
The token expires every 2 s; the plugin refreshes it with an ``IssueToken`` call.

- ``same_channel``: the refresh is made over the credentialed channel itself, inside the
  plugin's lock: the refresh call needs the plugin too, whose second thread waits for the
  lock the first holds (grpc#22471, google-auth-library-python#351; blind round 36's 02).
  The main thread waits in its Lookup.
- ``own_channel``: the twin: the refresh goes over a channel without the call credentials;
  lookup after lookup completes (progressing).

READY_FILE gets ``"<pid> server"`` once it serves and ``"<pid> client"`` once the client's
first refresh has started (``same_channel``) or a lookup after a refresh is done
(``own_channel``).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures

from server_client import dumps as _dumps
from server_client import ready, run

TOKEN_TTL_S = 2.0


def server(ready_file: str, port_file: str) -> None:
    import grpc

    issued = [0]

    def issue_token(request, context):  # type: ignore[no-untyped-def]
        issued[0] += 1
        return {"token": f"tok-{issued[0]}", "ttl": TOKEN_TTL_S}

    def lookup(request, context):  # type: ignore[no-untyped-def]
        return {"key": request["key"], "row": [request["key"]] * 8}

    handler = grpc.method_handlers_generic_handler("features.Gateway", {
        name: grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=json.loads, response_serializer=_dumps)
        for name, fn in (("IssueToken", issue_token), ("Lookup", lookup))})
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    grpc_server.add_generic_rpc_handlers((handler,))
    port = grpc_server.add_secure_port(
        "127.0.0.1:0", grpc.local_server_credentials(grpc.LocalConnectionType.LOCAL_TCP))
    grpc_server.start()
    with open(port_file, "w") as f:
        f.write(str(port))
    ready(ready_file, "server")
    grpc_server.wait_for_termination()


class TokenSource:
    """The current bearer token, refreshed under a lock when it is about to expire."""

    def __init__(self, issue: object, ready_file: str, mode: str) -> None:
        self._issue = issue
        self._lock = threading.Lock()
        self._token, self._expires = "", 0.0
        self._ready_file, self._mode = ready_file, mode

    def token(self) -> str:
        with self._lock:
            if time.monotonic() >= self._expires:
                if self._mode == "same_channel" and self._token:
                    ready(self._ready_file, "client")  # this refresh needs the plugin again
                reply = self._issue({"client": "trainer"}, timeout=None)  # type: ignore[operator]
                self._token = reply["token"]
                self._expires = time.monotonic() + reply["ttl"]
            return self._token


class BearerPlugin:
    def __init__(self, tokens: TokenSource) -> None:
        self._tokens = tokens

    def __call__(self, context: object, callback: object) -> None:
        callback((("authorization", f"Bearer {self._tokens.token()}"),), None)  # type: ignore[operator]


def client(ready_file: str, port_file: str, mode: str) -> None:
    import grpc

    target = f"127.0.0.1:{open(port_file).read()}"  # noqa: SIM115
    local = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    bootstrap = grpc.secure_channel(target, local)  # no call credentials
    first = bootstrap.unary_unary("/features.Gateway/IssueToken", request_serializer=_dumps,
                                  response_deserializer=json.loads)
    tokens = TokenSource(first, ready_file, mode)
    tokens.token()  # the first token, over the bootstrap channel
    creds = grpc.composite_channel_credentials(
        local, grpc.metadata_call_credentials(BearerPlugin(tokens), name="bearer"))
    channel = grpc.secure_channel(target, creds)
    if mode == "same_channel":  # "reuse the gateway connection" for the refreshes
        tokens._issue = channel.unary_unary(
            "/features.Gateway/IssueToken", request_serializer=_dumps,
            response_deserializer=json.loads)
    lookup = channel.unary_unary("/features.Gateway/Lookup", request_serializer=_dumps,
                                 response_deserializer=json.loads)
    started = time.monotonic()
    for key in range(1 << 30):
        lookup({"key": key})
        if mode == "own_channel" and key and time.monotonic() - started > 2 * TOKEN_TTL_S \
                and "client" not in open(ready_file).read():  # noqa: SIM115
            ready(ready_file, "client")
        time.sleep(0.05)


if __name__ == "__main__":
    run(__file__, server, client)
