"""A call connected to no server: a client waits inside a gRPC call while its process holds no
connected socket at all.

A gRPC channel connects to its target in the background and a call waits for that: with
``wait_for_ready=True`` (or before the channel's first connection) it is queued, not failed,
while the target refuses or does not answer, and gRPC retries the connection with a backoff
for ever (grpc#19973, grpc#26320). The kernel's socket table says it: no TCP connection of the
client's process is established and no Unix socket of it has a peer, so the call it waits in
went to no server, whichever servers the job runs (a stale address read from a discovery file,
a port the new server is not on: mill#4018). The waiter is the suspect: what it dials.
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import blocked
from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.frameworks.grpc import CALL_WAITS, CHANNEL_FILE
from hangscope.model import Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who, who_list


def _in_call(thread: Thread) -> bool:
    """Blocked inside a gRPC client call, waiting for its response."""
    return blocked(thread) and thread.state == "S" and any(
        not f.native and (f.file or "").endswith(CHANNEL_FILE) and f.name in CALL_WAITS
        for f in thread.frames)


def unconnected_call(g: Graph) -> WaitPattern | None:
    """Processes blocked in a gRPC call whose every socket is unconnected (module doc)."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    if kernel is None or not g.has_file(CHANNEL_FILE):
        return None
    connected = ({c.inode for c in kernel.tcp if c.state == 1}
                 | {u.inode for u in kernel.unix_peers if u.peer})
    callers: list[tuple[Process, Thread]] = []
    for proc in g.snap.processes:
        read = kernel.process(proc.pid)
        if proc.is_exited or proc.role in HELPER_ROLES or read is None:
            continue  # (its fds unread: nothing said of its connections)
        thread = next((t for t in proc.threads if _in_call(t)), None)
        if thread is not None and not any(r.inode in connected for r in read.fds):
            callers.append((proc, thread))
    if not callers:
        return None
    proc, thread = callers[0]
    servers = [p for p in g.snap.processes if not p.is_exited and p.listening
               and p not in (c for c, _ in callers)]
    ports = sorted({s.port for p in servers for s in p.listening if s.port})
    others = f" (and {who_list([c for c, _ in callers[1:]])} the same)" if callers[1:] else ""
    listening = (f"; the job's servers listen on port{'s' if len(ports) > 1 else ''} "
                 f"{', '.join(map(str, ports))} ({who_list(servers)}), and it is connected to "
                 "none of them" if ports else "; nothing in the job listens")
    chain = (f"{thread_words(proc, thread)} waits in a gRPC call{site_words(thread)}{others} "
             f"with no connection to any server: {who(proc)} holds no established TCP "
             f"connection and no connected Unix socket{listening}. Its channel's target does "
             "not answer, and gRPC retries the connection for ever while the call waits for it "
             "(wait_for_ready=True, or a channel not yet connected, with no deadline): check "
             "the address it dials (a stale address or port file, the server's old port), and "
             "give the call a timeout")
    members = (proc.pid, *(c.pid for c, _ in callers[1:]), *(p.pid for p in servers))
    return WaitPattern("unconnected_call", members, chain, (), proc.pid, thread.tid,
                       also=tuple(c.pid for c, _ in callers[1:]))
