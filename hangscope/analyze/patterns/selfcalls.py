"""Calls that no server can answer.

A pool that calls its own server: every worker of a process's thread pool runs a task
blocked inside a call, and the process holds both ends of a connection to a port it listens
on itself. Its requests are served by that same pool (a gRPC server's handlers run on the
``ThreadPoolExecutor`` it was built with): the nested requests wait in the pool's queue for a
worker, and every worker waits for them (grpc/grpc#8603, "bounded server thread pools
considered harmful"; #7052). The kernel's facts say it, whatever the library: the TCP table
pairs the client's socket with the one the process accepted. Pools that call each other's
servers (``pool_cycle``), torch RPC pools full of nested calls (``rpc_pools``), and a torch RPC
whose reply no server is computing (``unserved_call``); more gRPC calls than a pool's workers:
analyze/patterns/ends/grpcpool.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.graph.threadedges import blocked, executor_worker, own_frame, runs_task
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.patterns.behind import behind
from hangscope.frameworks.torch_distributed import (
    RPC_CALL_FILE,
    RPC_HANDLER_FILE,
    RPC_POOL_THREAD,
    rpc_agents,
    rpc_call,
    rpc_handler,
    rpc_handler_calls,
    rpc_serving,
)
from hangscope.model import Category, Process, Snapshot, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who, who_list


def self_connections(snap: Snapshot, proc: Process) -> list[tuple[int, int, int]]:
    """(client fd, accepted fd, port) of each TCP connection whose two ends ``proc`` holds,
    to a port it listens on."""
    return [(client, accepted, port) for client, pid, accepted, port
            in calls_out(snap, proc, (proc,)) if pid == proc.pid]


def calls_out(snap: Snapshot, proc: Process, servers: Sequence[Process]
              ) -> list[tuple[int, int, int, int]]:
    """(client fd, server PID, accepted fd, port) of each TCP connection ``proc`` holds as a
    client to a port one of ``servers`` listens on, whose accepted end that server holds."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    mine = kernel.process(proc.pid) if kernel is not None else None
    if kernel is None or mine is None:
        return []
    by_port = {s.port: srv for srv in servers for s in srv.listening if s.port is not None}
    if not by_port:
        return []
    fds = {r.inode: r.fd for r in mine.fds if r.inode is not None}
    # (A listening port's accepted sockets all share its local address: the pair is the key.)
    ends = {(c.local, c.remote): c for c in kernel.tcp}
    out = []
    for conn in kernel.tcp:
        port = conn.remote.rpartition(":")[2]
        srv = by_port.get(int(port)) if conn.inode in fds and port.isdigit() else None
        server = ends.get((conn.remote, conn.local)) if srv is not None else None
        held = kernel.process(srv.pid) if srv is not None else None
        accepted = next((r.fd for r in held.fds if server is not None
                         and r.inode == server.inode), None) if held is not None else None
        if srv is not None and accepted is not None:
            out.append((fds[conn.inode], srv.pid, accepted, int(port)))
    return out


def saturated_workers(proc: Process) -> list[Thread]:
    """The worker threads of the process's thread pool where every one runs a task blocked
    inside a call (a socket, or a library's own wait), none computing; else none."""
    workers = [t for t in proc.threads if executor_worker(t)]
    if workers and all(runs_task(t) and blocked(t) and t.category in (
            Category.IPC_WAIT, Category.LOCK) for t in workers):
        return workers
    return []


def pool_words(proc: Process, workers: list[Thread]) -> tuple[str, str]:
    """The pool's threads (named, the first four) and where their tasks wait."""
    sites = sorted({f"{f.name} ({f.short_file}:{f.line})" for t in workers
                    if (f := own_frame(t)) is not None})
    at = f" at {', '.join(sites[:2])}" if sites else ""
    named = list(dict.fromkeys(t.name or str(t.tid) for t in workers))  # a pool may name all alike
    names = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
    return names, at


def self_call(g: Graph) -> WaitPattern | None:
    if not g.has_file("concurrent/futures/thread.py"):
        return None
    for proc in g.snap.processes:
        if proc.is_exited or not proc.listening:
            continue
        # Every worker busy with a task that waits (an idle one would take the nested
        # request), each blocked in a call (a socket, or a library's own wait), none computing.
        workers = saturated_workers(proc)
        found = self_connections(g.snap, proc) if workers else []
        if not found:
            continue
        client, accepted, port = found[0]
        names, at = pool_words(proc, workers)
        chain = (f"all {len(workers)} worker threads of {who(proc)}'s thread pool ({names}) "
                 f"run tasks that wait inside a call{at}, and {who(proc)} is connected to its "
                 f"own listening port {port} (fd {client} to fd {accepted}, which it accepted): "
                 "the pool calls its own server, whose requests wait for a free worker of "
                 "that same pool, and none will be free. Call the handler in-process, serve "
                 "the nested call from another pool or server, or give the call a deadline"
                 + behind(g, (proc.pid,)))
        return WaitPattern("self_call", (proc.pid,), chain, (), proc.pid, workers[0].tid)
    return None


def pool_cycle(g: Graph) -> WaitPattern | None:
    """Servers whose pools call each other's in a ring (grpc/grpc#8603 across services: a
    ranker's handler calls a feature service, whose handler calls the ranker back): every
    worker of each pool runs a task blocked in a call to the next server's port, whose
    requests wait for a worker of that full pool. The kernel's TCP table links each call to
    the server that accepted it."""
    if not g.has_file("concurrent/futures/thread.py"):
        return None
    pools = {p.pid: (p, w) for p in g.snap.processes
             if not p.is_exited and p.listening and (w := saturated_workers(p))}
    if len(pools) < 2:
        return None
    servers = [p for p, _ in pools.values()]
    nxt = {pid: {srv: (port, client) for client, srv, _, port
                 in calls_out(g.snap, proc, servers) if srv != pid}
           for pid, (proc, _) in pools.items()}
    # the servers a process outside the pools calls: where requests enter
    entered = {srv for p in g.snap.processes if p.pid not in pools
               for _, srv, _, _ in calls_out(g.snap, p, servers)}
    for start in pools:
        ring = _ring(nxt, start)
        if ring is None:
            continue
        entry = next((pid for pid in ring if pid in entered), ring[0])  # the ring read from it
        ring = ring[ring.index(entry):] + ring[:ring.index(entry)]
        hops = []
        for i, pid in enumerate(ring):
            proc, workers = pools[pid]
            after = ring[(i + 1) % len(ring)]
            port, client = nxt[pid][after]
            names, at = pool_words(proc, workers)
            hops.append(f"all {len(workers)} worker threads of {who(proc)}'s thread pool "
                        f"({names}) run tasks that wait inside a call{at}, to "
                        f"{who(pools[after][0])}'s port {port} (fd {client})")
        chain = ("; ".join(hops) + ": each pool's requests to the next wait for a free worker "
                 "of a pool whose workers all wait in turn, and none will be free. Serve the "
                 "call back from another pool or server (or pass what it fetches along with "
                 "the request), bound the calls in flight below each pool's size, or give "
                 "the calls deadlines" + behind(g, tuple(ring)))
        return WaitPattern("pool_cycle", tuple(ring), chain, (), ring[0],
                           pools[ring[0]][1][0].tid)
    return None


def _ring(nxt: dict[int, dict[int, tuple[int, int]]], start: int) -> list[int] | None:
    """A ring of calls from ``start`` back to it through the saturated servers, or None."""
    path, seen = [start], {start}
    while True:
        ahead = [pid for pid in nxt.get(path[-1], {}) if pid in nxt]
        if start in ahead and len(path) > 1:
            return path
        step = next((pid for pid in ahead if pid not in seen), None)
        if step is None:
            return None
        path.append(step)
        seen.add(step)


def rpc_pools(g: Graph) -> WaitPattern | None:
    """torch.distributed.rpc servers whose every RPC thread runs a request's function that
    waits in a nested ``rpc_sync`` (pytorch#26362): a nested request to a server whose threads
    are all taken waits in its queue, so the threads that would answer the waiting ones never
    come free. Every thread of the agent's pool is read (an idle one has no Python stack), and
    the window saw none of them move."""
    if not g.has_file(RPC_HANDLER_FILE):
        return None  # no thread runs a request
    full = []
    for proc in g.snap.processes:
        pool = [t for t in proc.threads if (t.name or "").startswith(RPC_POOL_THREAD)]
        if pool and all(rpc_handler_calls(t.name, t.frames) and blocked(t) for t in pool):
            full.append((proc, pool))
    if not full:
        return None
    parts = []
    for proc, pool in full:
        names, at = pool_words(proc, pool)
        parts.append(f"all {len(pool)} RPC threads of {who(proc)} ({names}) run requests "
                     f"that wait inside a nested rpc_sync{at}")
    members = tuple(p.pid for p, _ in full)
    chain = ("; ".join(parts) + ": a nested request to a server whose RPC threads are all "
             "taken waits in its queue, and the threads that would answer the waiting ones "
             "never come free. Make the function non-blocking (@rpc.functions.async_execution, "
             "returning rpc.rpc_async(...).then(...)), keep the requests in flight below "
             "num_worker_threads, or give rpc_sync a timeout" + behind(g, members))
    return WaitPattern("rpc_pools", members, chain, (), members[0], full[0][1][0].tid)


def unserved_call(g: Graph) -> WaitPattern | None:
    """A torch RPC whose reply no server is computing (pytorch/examples#780): a thread waits in
    ``rpc_sync`` while no other RPC thread of the job's workers runs a request or
    computes (each one idle in its pool: none has a stack, none is on a CPU), over a window
    in which the waiting stack stayed put. The server took the request and answered with a
    future that nothing completes (``@rpc.functions.async_execution``: a batch that waits
    for callers that never come), or the request never arrived; the waiter is the suspect,
    and the workers waiting on the requests it runs for them are behind it (rpcedges.py)."""
    if not g.has_file(RPC_CALL_FILE):
        return None  # no thread waits in rpc_sync
    agents = rpc_agents(g.snap.processes)
    if len(agents) < 2:
        return None
    for proc in agents:
        for thread in proc.threads:
            if not (rpc_call(thread.frames) and blocked(thread) and thread.state != "R"):
                continue
            others = [p for p in agents if p is not proc]
            if any(t is not thread and _serving(t) for p in agents for t in p.threads):
                continue  # a server runs a request: it may be this one, or on its way
            return _unserved(g, proc, thread, others)
    return None


def _serving(thread: Thread) -> bool:
    """An RPC pool thread that runs a request (its function's stack), or computes one that
    has no Python frames (a builtin operator) on a CPU."""
    return rpc_serving(thread.name, thread.frames) or (
        (thread.name or "").startswith(RPC_POOL_THREAD) and thread.state == "R")


def _unserved(g: Graph, proc: Process, thread: Thread, others: list[Process]) -> WaitPattern:
    handled = (", where it runs a request of another worker (under _run_function)"
               if rpc_handler(thread.frames) else "")
    idle = who_list(others)
    chain = (f"{thread_words(proc, thread)} waits in rpc_sync{site_words(thread)}{handled} "
             f"for a reply that no server of the job is computing: no RPC thread of "
             f"{idle} runs a request or computes. The server took the request and answered "
             "with a future that nothing completes (a function under "
             "@rpc.functions.async_execution returns a torch.futures.Future that it sets "
             "later, from another caller's request: a batch that waits for callers that never "
             "come, such as a worker whose data ran out), or the request never arrived. "
             "Complete the future on every path (a last, smaller batch), or "
             "give rpc_sync a timeout" + behind(g, (proc.pid,)))
    return WaitPattern("unserved_call", (proc.pid,), chain, (), proc.pid, thread.tid)

