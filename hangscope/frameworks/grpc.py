"""gRPC's Python server (grpcio): ``server.start()`` serves on gRPC's own threads (its
completion-queue poller, ``Thread-N (_serve)``, and the handler pool's workers, idle in their
executor's queue between calls), and the main thread blocks in ``wait_for_termination`` until
the server stops (a timed wait it re-checks every few tenths of a second). A main thread there
serves: it waits for no request (grpc#40138: "will not consume computational resources")."""

from __future__ import annotations

from hangscope.frameworks import Framework

#: Where gRPC's Python code runs a call's two directions (grpc/_channel.py, grpc/_server.py):
#: a client thread waiting for a stream's next response (or a unary call's only one); the
#: client's thread that pulls the request iterator and sends each request; a server thread
#: running a handler; a handler waiting for the client's next request message.
CHANNEL_FILE = "grpc/_channel.py"
SERVER_FILE = "grpc/_server.py"
RESPONSE_WAITS = frozenset({"_MultiThreadedRendezvous._next", "_Rendezvous.__next__",
                            "_end_unary_response_blocking", "_MultiThreadedRendezvous.result"})
#: A client thread inside a call, waiting for its response or the stream's next one: the
#: response waits, and a unary call still in its blocking send-and-wait (the handler has not
#: answered, or no handler has started it).
CALL_WAITS = RESPONSE_WAITS | {"_UnaryUnaryMultiCallable._blocking"}
REQUEST_PRODUCER = "consume_request_iterator"
HANDLER_RUNS = frozenset({"_stream_response_in_pool", "_unary_response_in_pool"})
#: A server stream's handler: a subscription (a watch) that waits for its next event between
#: the messages it yields, for as long as nothing happens.
STREAM_RUNS = "_stream_response_in_pool"
REQUEST_WAIT = frozenset({"_RequestIterator._next"})
#: Where gRPC runs a call credentials' metadata plugin (``grpc.metadata_call_credentials``):
#: on a thread of its own for each call, before the call is sent (grpc#22471).
PLUGIN_FILE = "grpc/_plugin_wrapping.py"
PLUGIN_RUNS = frozenset({"_Plugin.__call__"})
#: Why a call that waits for its metadata, in a cycle with the plugin, waits for ever.
PLUGIN_CYCLE = (
    "gRPC sends a call only once its call credentials' plugin has given the call's metadata, "
    "and runs the plugin on a thread of its own for each call; a plugin that waits for what a "
    "call of the same credentials holds (a token refresh made over the channel it "
    "authenticates, inside the plugin's lock) waits for a call that waits for it. Refresh over "
    "a channel without those call credentials, outside the lock, with a deadline")

FRAMEWORK = Framework(
    name="grpc",
    serve_waits=(("wait_for_termination", "grpc/_server.py"),),
    # a unary call in flight: the client holds a request and waits for its one answer (a
    # stream's next message may be a subscription's next event: not said here)
    reply_waits=(("_blocking", CHANNEL_FILE), ("_end_unary_response_blocking", CHANNEL_FILE)),
    # its own Python code: a handler's call site is the user's servicer method under it
    library_files=("grpc/",),
)
