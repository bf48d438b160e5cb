"""One gRPC call, both directions: a client waits for the server's response, and a
streaming handler waits for the client's next request.

A client thread in a stream's ``_next`` (grpc/_channel.py), or in a unary call's blocking send-
and-wait, waits for whichever handler of the server it is connected to runs its call (a thread
of the server's pool in ``_stream_response_in_pool``); a handler in ``_RequestIterator._next``
(grpc/_server.py) waits for the client's next request, which the client's
``consume_request_iterator`` thread pulls from the program's own request iterator and sends.
Each side waits for the other over one TCP connection whose bytes say nothing (HTTP/2 frames):
the frames say who. A bidi stream whose request iterator waits on its responses while the
handler waits for more requests before it answers (grpc#21737's workaround, a window on a
micro-batching server) is then a chain that ends in the iterator's own wait.

Pure, over the snapshot's stacks and its kernel's TCP connections.
"""

from __future__ import annotations

from collections.abc import Callable

from hangscope.analyze.graph.stackindex import index_of
from hangscope.analyze.graph.threadedges import own_frame
from hangscope.frameworks.grpc import (
    CALL_WAITS,
    CHANNEL_FILE,
    HANDLER_RUNS,
    PLUGIN_FILE,
    PLUGIN_RUNS,
    REQUEST_PRODUCER,
    REQUEST_WAIT,
    SERVER_FILE,
)
from hangscope.model import Frame, Process, Snapshot, Thread
from hangscope.model.waits import WaitEdge


def _at(frames: tuple[Frame, ...], names: frozenset[str] | str, file: str) -> Frame | None:
    return next((f for f in frames if not f.native and (f.file or "").endswith(file) and (
        f.name in names if isinstance(names, frozenset)
        else f.name.rsplit(".", 1)[-1] == names)), None)


def in_grpc_call(frames: tuple[Frame, ...]) -> bool:
    """A client thread's stack inside a gRPC call, waiting for its response (a unary call's
    blocking send-and-wait, a stream's next message)."""
    return _at(frames, CALL_WAITS, CHANNEL_FILE) is not None


def _pairs(snap: Snapshot) -> set[tuple[int, int]]:
    """(client PID, server PID) of every TCP connection from a process of the job to a port
    another one listens on."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    if kernel is None:
        return set()
    port_of = {sock.port: proc.pid for proc in snap.processes for sock in proc.listening
               if sock.kind.startswith("tcp") and sock.port is not None}
    return {(client, server) for client, server, conn in kernel.tcp_pairs()
            if port_of.get(int(port) if (port := conn.remote.rsplit(":", 1)[-1]).isdigit()
                           else -1) == server}


def _site(thread: Thread) -> str:
    """`` at f (file:line)`` of the program's own innermost frame, or ""."""
    own = own_frame(thread)
    return f" at {own.name} ({own.short_file}:{own.line})" if own is not None else ""


#: The object of a call's wait for its metadata (analyze/patterns/cycleadvice.py reads it).
METADATA = "its call's metadata, from the call credentials' plugin"


def plugin_edges(snap: Snapshot) -> list[WaitEdge]:
    """A thread inside a gRPC call waits for its metadata while a thread of its process runs
    the call credentials' plugin (``grpc/_plugin_wrapping.py``): gRPC sends the call only once
    the plugin answers. Which call a plugin thread serves is not known: probable edges to each
    (a thread inside a call made from a plugin waits for the others, not for itself)."""
    if not index_of(snap.processes).has_file(PLUGIN_FILE):
        return []
    edges: list[WaitEdge] = []
    for proc in snap.processes:
        plugins = [t for t in proc.threads if t.state != "R" and _at(t.frames, PLUGIN_RUNS,
                                                                       PLUGIN_FILE)]
        if not plugins or proc.is_exited:
            continue
        for waiter in (t for t in proc.threads if t.state != "R" and in_grpc_call(t.frames)):
            edges.extend(WaitEdge(
                proc.pid, waiter.tid, "grpc", METADATA,
                f"its stack waits in a gRPC call ({CHANNEL_FILE}), which gRPC sends once its "
                f"call credentials' plugin ({PLUGIN_FILE}) gives the metadata; thread "
                f"{plugin.name or plugin.tid} runs that plugin{_site(plugin)}", proc.pid,
                plugin.tid, probable=True) for plugin in plugins if plugin.tid != waiter.tid)
    return edges


def grpc_edges(snap: Snapshot) -> list[WaitEdge]:
    """Client response waits -> the connected server's handler threads; handler request
    waits -> the connected client's request-producing threads; calls -> the threads running
    their metadata plugin (:func:`plugin_edges`)."""
    index = index_of(snap.processes)
    if not index.has_file(CHANNEL_FILE):
        return []
    edges = plugin_edges(snap)
    if not index.has_file(SERVER_FILE):
        return edges
    procs = {p.pid: p for p in snap.processes}
    for client, server in sorted(_pairs(snap)):
        cproc, sproc = procs[client], procs[server]
        handlers = [t for t in sproc.threads if _at(t.frames, HANDLER_RUNS, SERVER_FILE)]
        producers = [t for t in cproc.threads if _at(t.frames, REQUEST_PRODUCER, CHANNEL_FILE)]
        edges.extend(_edges(
            cproc, [t for t in cproc.threads if in_grpc_call(t.frames)],
            sproc, handlers, "the gRPC call's next response",
            lambda pid, to: (f"its stack waits in gRPC's response wait ({CHANNEL_FILE}); "
                             f"PID {pid}, the server it is connected to, runs the call on thread "
                             f"{to.tid}{_site(to)}")))
        edges.extend(_edges(
            sproc, [t for t in handlers if _at(t.frames, REQUEST_WAIT, SERVER_FILE)],
            cproc, producers, "the client's next request message",
            lambda pid, to: (f"its handler waits for the next request of its stream "
                             f"({SERVER_FILE} _RequestIterator._next); PID {pid}'s thread "
                             f"{to.tid} pulls the request iterator and sends each "
                             "(consume_request_iterator), and is"
                             f"{_site(to) or ' inside it'} now")))
    return edges


def _edges(proc: Process, waiters: list[Thread], other: Process, targets: list[Thread],
           obj: str, how: Callable[[int, Thread], str]) -> list[WaitEdge]:
    """An edge from each of ``proc``'s blocked ``waiters`` to each of ``other``'s
    ``targets`` (probable where there are several)."""
    return [WaitEdge(proc.pid, waiter.tid, "grpc", obj, how(other.pid, target), other.pid,
                     target.tid, probable=len(targets) > 1)
            for waiter in waiters if waiter.state != "R" for target in targets]
