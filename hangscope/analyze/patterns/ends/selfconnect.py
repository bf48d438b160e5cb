"""A TCP socket connected to itself: its reader waits for bytes only it could send.

A client that retries ``connect(127.0.0.1:PORT)`` while its server is still starting, with
PORT inside the kernel's ephemeral range (``net.ipv4.ip_local_port_range``, 32768-60999 by
default), is sooner or later given PORT itself as its source port; the SYN meets itself, the
simultaneous open succeeds, and the connect returns with no listener at all. The client then
waits for the server's greeting on a socket whose peer is that same socket, and because the
socket holds the port, the server's ``bind()`` fails with EADDRINUSE for as long as it lives.

The kernel says it directly: the connection's local and remote addresses are one
(analyze/graph/waitgraph.py marks that edge). Read first in analyze/patterns/waitpatterns.py:
nothing else
the job does can end that wait.
"""

from __future__ import annotations

from hangscope.analyze.graph.waitwalk import Graph, hops_into, site_words, waits_into
from hangscope.model import Process
from hangscope.model.waits import SELF_CONNECTED, WaitPattern
from hangscope.words import who

#: What a failed bind() says in a log (strerror of EADDRINUSE, in Python and in C).
_IN_USE = ("Address already in use", "EADDRINUSE")


def _cannot_bind(g: Graph, port: str, skip: int) -> list[tuple[Process, str]]:
    """Processes whose log's last lines say a bind failed: the port is taken. A line naming
    ``port`` first; any such line where none names it."""
    found = []
    for proc in g.snap.processes:
        if proc.pid == skip or proc.is_exited:
            continue
        lines = [line for line in (*proc.log_errors, *proc.log_tail)
                 if any(m in line for m in _IN_USE)]
        if lines:
            named = [line for line in lines if port in line]
            found.append((proc, (named or lines)[-1].strip()))
    return found


def self_connect(g: Graph) -> WaitPattern | None:
    for i, edge in enumerate(g.edges):
        if edge.kind != "tcp" or not edge.object.endswith(SELF_CONNECTED) \
                or edge.to_pid != edge.pid or edge.to_tid != edge.tid:
            continue
        proc, thread = g.procs.get(edge.pid), g.threads.get((edge.pid, edge.tid))
        if proc is None or thread is None:
            continue
        address = edge.object.split(" -> ", 1)[0].removeprefix("TCP ")
        port = address.rsplit(":", 1)[-1]
        name = f"thread {thread.name or thread.tid} of {who(proc)}"
        fd = f" (fd {edge.fd})" if edge.fd is not None else ""
        chain = (f"{name} waits to read TCP {address}{fd}{site_words(thread)}, a socket "
                 f"connected to itself: its local and remote addresses are both {address}, so "
                 "only its own writes could ever arrive. Its connect() to port "
                 f"{port}, retried while nothing listened there, was given port {port} itself "
                 "as its source port (a TCP self-connect: the port is in the kernel's "
                 "ephemeral range, net.ipv4.ip_local_port_range), and the socket now holds "
                 "that port")
        blocked = _cannot_bind(g, port, proc.pid)
        for other, line in blocked[:3]:
            chain += (f"; {who(other)} cannot listen on it: its log says “{line}”")
        chain += (". Close the socket and connect again when its local address equals its "
                  "peer's (getsockname() == getpeername()), and give the server a port below "
                  "the ephemeral range (or reserve it: net.ipv4.ip_local_reserved_ports)")
        others, into = waits_into(g, proc.pid)
        into = [k for k in into if k != i][:3]
        chain += hops_into(g, into)
        members = tuple(dict.fromkeys([proc.pid, *(p.pid for p, _ in blocked), *others]))
        return WaitPattern("self_connect", members, chain, (i, *into), proc.pid, thread.tid)
    return None
