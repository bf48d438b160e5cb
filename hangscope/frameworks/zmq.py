"""pyzmq, the IPC of SGLang and vLLM: each context runs I/O threads named ``ZMQbg/IO/0`` (and
``ZMQbg/Reaper``) that own the TCP and Unix sockets; a Python thread in ``recv``/``poll``
waits on those connections' peers (analyze/graph/zmqedges.py). Whether a thread in a zmq
receive waits for work or for an answer is the wait-for graph's to say (who holds the other end,
analyze/patterns/calm/engines.py), not its file's: pyzmq is no server loop."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(
    name="zmq",
    thread_names=("ZMQbg/",),
)
