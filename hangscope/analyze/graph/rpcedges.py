"""torch.distributed.rpc: a caller waits for the requests it sent, which other workers run.

A thread blocked on an RPC (``rpc_sync``, or the futures of ``rpc_async``: ``Future.wait``,
``torch.futures.wait_all``) waits for a reply that a request's function computes on another
worker, on a thread of that worker's RPC pool (``_run_function``). Which worker it asked is in
the call's arguments, not on the stack; every other worker whose pool runs a request now may
be the one: a probable edge to each (as a Ray ``get`` of plain tasks' results points at every
worker that runs a task, objectedges.py). A parameter server waiting on its trainers' loops,
each run as its request, then waits on the trainers that run them: where they progress, the
job does. With no request running anywhere, no edge: analyze/patterns/selfcalls.py's
``unserved_call`` says why.
"""

from __future__ import annotations

from hangscope.analyze.graph.stackindex import index_of
from hangscope.frameworks.torch_distributed import (
    RPC_HANDLER_FILE,
    rpc_agents,
    rpc_call,
    rpc_future_wait,
    rpc_serving,
)
from hangscope.model import Snapshot
from hangscope.model.waits import WaitEdge


def rpc_edges(snap: Snapshot) -> list[WaitEdge]:
    """A thread in an RPC wait -> each other worker's pool thread that runs a request."""
    if not index_of(snap.processes).has_file(RPC_HANDLER_FILE):
        return []  # no request runs anywhere: no edge to draw
    agents = rpc_agents(snap.processes)
    if len(agents) < 2:
        return []
    running = {p.pid: [t for t in p.threads if rpc_serving(t.name, t.frames)] for p in agents}
    edges: list[WaitEdge] = []
    for proc in agents:
        for thread in proc.threads:
            sync = rpc_call(thread.frames)
            if not (sync or rpc_future_wait(thread.frames)) or thread.state == "R":
                continue
            what = "rpc_sync" if sync else "its RPC futures"
            edges.extend(WaitEdge(
                proc.pid, thread.tid, "rpc", f"the reply to {what}",
                f"its stack waits in {what}; the worker it asked is in the call's arguments, "
                f"and PID {other.pid}'s RPC thread {handler.tid} runs a request's function now "
                "(_run_function)", other.pid, handler.tid, probable=True)
                for other in agents if other is not proc
                for handler in running[other.pid][:1])
    return edges
