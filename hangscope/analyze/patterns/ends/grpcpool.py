"""More gRPC calls wait on a server than its thread pool has workers, every worker blocked.

A gRPC server built on ``ThreadPoolExecutor(max_workers=N)`` runs each call on one worker for
the call's whole life: a server stream that waits for its next event keeps its worker as long
as it stays open. With every worker blocked inside a handler, the calls beyond the pool's
size wait in its queue, unseen: no thread of the server runs them, and their clients wait in
gRPC's blocking call (grpc#7052, #8616: "bounded server thread pools considered harmful"). A
handler that waits for what a queued call would do (a watch notified by a publish) never
returns at all. The stacks count both sides: the clients' threads inside a call to the
server's port (the kernel's TCP pairs), the server's workers inside their handlers.
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.patterns.selfcalls import calls_out, pool_words, saturated_workers
from hangscope.frameworks.grpc import CALL_WAITS, CHANNEL_FILE
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def overbooked_pool(g: Graph) -> WaitPattern | None:
    """The first server of the job with more gRPC calls waiting on it than its pool has
    workers, every worker running a handler blocked inside it."""
    if not g.has_file(CHANNEL_FILE) or not g.has_file("concurrent/futures/thread.py"):
        return None
    for server in g.snap.processes:
        workers = saturated_workers(server) if server.listening and not server.is_exited else []
        if not workers:
            continue
        calls = [(proc, t) for proc in g.snap.processes if proc is not server and calls_out(
            g.snap, proc, (server,)) for t in proc.threads if blocked(t) and any(
                not f.native and (f.file or "").endswith(CHANNEL_FILE) and f.name in CALL_WAITS
                for f in t.frames)]
        if len(calls) <= len(workers):
            continue
        names, at = pool_words(server, workers)
        waiting = "; ".join(f"{thread_words(p, t)}{site_words(t)}" for p, t in calls[:4])
        chain = (f"{len(calls)} gRPC calls wait on {who(server)} ({waiting}), and all "
                 f"{len(workers)} worker threads of its server's pool ({names}) run handlers "
                 f"blocked inside them{at}: {len(calls) - len(workers)} of the calls "
                 f"{'waits' if len(calls) - len(workers) == 1 else 'wait'} in the pool's queue "
                 "until a handler returns, and a stream or a wait that never "
                 "ends keeps its worker for good (a handler that waits for what a queued call "
                 "would do never returns). Give the server more workers than the calls it "
                 "holds at once (max_workers), cap them (maximum_concurrent_rpcs), or serve "
                 "streams with grpc.aio")
        members = (server.pid, *dict.fromkeys(p.pid for p, _ in calls))
        return WaitPattern("overbooked_pool", members, chain, (), server.pid, workers[0].tid)
    return None

