"""A pool that calls its own server: every worker of a process's thread pool runs a task
blocked inside a call, and the process holds both ends of a connection to a port it listens
on itself. Its requests are served by that same pool (a gRPC server's handlers run on the
``ThreadPoolExecutor`` it was built with): the nested requests wait in the pool's queue for a
worker, and every worker waits for them (grpc/grpc#8603, "bounded server thread pools
considered harmful"; #7052). The kernel's facts say it, whatever the library: the TCP table
pairs the client's socket with the one the process accepted.
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import blocked, executor_worker, own_frame, runs_task
from hangscope.analyze.graph.waitwalk import Graph
from hangscope.analyze.patterns.behind import behind
from hangscope.model import Category, Process, Snapshot
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def self_connections(snap: Snapshot, proc: Process) -> list[tuple[int, int, int]]:
    """(client fd, accepted fd, port) of each TCP connection whose two ends ``proc`` holds,
    to a port it listens on."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    mine = kernel.process(proc.pid) if kernel is not None else None
    ports = {s.port for s in proc.listening if s.port is not None}
    if mine is None or not ports:
        return []
    fds = {r.inode: r.fd for r in mine.fds if r.inode is not None}
    # (A listening port's accepted sockets all share its local address: the pair is the key.)
    ends = {(c.local, c.remote): c for c in kernel.tcp}
    out = []
    for conn in kernel.tcp:
        server = ends.get((conn.remote, conn.local))
        port = conn.remote.rpartition(":")[2]
        if conn.inode in fds and port.isdigit() and int(port) in ports and server is not None \
                and server.inode in fds:
            out.append((fds[conn.inode], fds[server.inode], int(port)))
    return out


def self_call(g: Graph) -> WaitPattern | None:
    if not g.has_file("concurrent/futures/thread.py"):
        return None
    for proc in g.snap.processes:
        if proc.is_exited or not proc.listening:
            continue
        workers = [t for t in proc.threads if executor_worker(t)]
        # Every worker busy with a task that waits (an idle one would take the nested
        # request), each blocked in a call (a socket, or a library's own wait), none computing.
        if not workers or not all(runs_task(t) and blocked(t) and t.category in (
                Category.IPC_WAIT, Category.LOCK) for t in workers):
            continue
        found = self_connections(g.snap, proc)
        if not found:
            continue
        client, accepted, port = found[0]
        sites = sorted({f"{f.name} ({f.short_file}:{f.line})" for t in workers
                        if (f := own_frame(t)) is not None})
        at = f" at {', '.join(sites[:2])}" if sites else ""
        names = ", ".join(t.name or str(t.tid) for t in workers[:4]) + (
            f" and {len(workers) - 4} more" if len(workers) > 4 else "")
        chain = (f"all {len(workers)} worker threads of {who(proc)}'s thread pool ({names}) "
                 f"run tasks that wait inside a call{at}, and {who(proc)} is connected to its "
                 f"own listening port {port} (fd {client} to fd {accepted}, which it accepted): "
                 "the pool calls its own server, whose requests wait for a free worker of "
                 "that same pool, and none will be free. Call the handler in-process, serve "
                 "the nested call from another pool or server, or give the call a deadline"
                 + behind(g, (proc.pid,)))
        return WaitPattern("self_call", (proc.pid,), chain, (), proc.pid, workers[0].tid)
    return None
