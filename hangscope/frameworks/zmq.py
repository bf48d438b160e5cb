"""pyzmq, the IPC of SGLang and vLLM: each context runs I/O threads named ``ZMQbg/IO/0`` (and
``ZMQbg/Reaper``) that own the TCP and Unix sockets; a Python thread in ``recv``/``poll``
waits on those connections' peers (analyze/graph/zmqedges.py). An engine's poll loop in
``zmq/sugar/poll.py`` or ``socket.py`` with nothing queued is waiting for work."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(
    name="zmq",
    thread_names=("ZMQbg/",),
    server_loop_files=("zmq/",),
)
