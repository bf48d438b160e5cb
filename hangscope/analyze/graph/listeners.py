"""The job's listener of a local TCP connection whose other end no process holds yet.

A connection to a port on this host that the listener has not accepted sits, established by
the kernel, in the listening socket's accept queue: no process's fds hold its server end, so
the wait-for graph follows it to the process listening on that port (a single-threaded
server busy in a handler never accepts it: a request/response cycle).
"""

from __future__ import annotations

from hangscope.model import Process
from hangscope.model.waits import WaitEdge

_ANY = ("0.0.0.0", "::", "0:0:0:0:0:0:0:0", "*", "")
_LOOPBACK = ("::1", "0:0:0:0:0:0:0:1")


def listeners_of(listeners: dict[int, list[tuple[str, int]]], local: str,
                 remote: str) -> list[int]:
    """PIDs listening on ``remote`` (``127.0.0.1:8080``), from ``listeners`` (port ->
    (listening address, PID)), when ``remote`` is this host: loopback, or the connection's own
    local address (a port of the same number on another host is that host's)."""
    address, _, port = remote.rpartition(":")
    if not port.isdigit():
        return []
    address = address.strip("[]")
    loopback = address.startswith("127.") or address in _LOOPBACK
    if not loopback and address != local.rpartition(":")[0].strip("[]"):
        return []
    return sorted({pid for listen, pid in listeners.get(int(port), [])
                   if listen in _ANY or listen == address})


def asks(edge: WaitEdge, server: Process) -> bool:
    """``edge`` reads a TCP connection to a port ``server`` listens on: a request to it, whose
    reply it waits for."""
    if edge.kind != "tcp" or " -> " not in edge.object:
        return False
    port = edge.object.rsplit(":", 1)[-1]
    return port.isdigit() and any(s.port == int(port) for s in server.listening)
