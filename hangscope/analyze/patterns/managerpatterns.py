"""The wait-for graph's orphaned Manager lock: clients wait for a lock that a
``multiprocessing`` Manager hosts, and no live client holds it.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph). A Manager serves each client
connection on a thread of its own (``Server.serve_client``), and a proxy's ``acquire()`` runs
the hosted lock's ``acquire`` on that thread: it blocks there while another connection's client
holds the lock. The holder's thread is back in its ``recv`` waiting for that client's next
request (``release``). When every serving thread either waits in such an ``acquire`` or serves
a client that waits for the manager itself, no live client holds the lock: its holder's
connection is gone, a client that died holding it (the Manager never releases a lock for a
client that disconnects), and the waits never end.
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, hop, thread_names, waits_into
from hangscope.model import Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_MANAGERS = "multiprocessing/managers.py"


def _serving(thread: Thread) -> bool:
    return any(not f.native and (f.file or "").endswith(_MANAGERS)
               and f.name.rsplit(".", 1)[-1] == "serve_client" for f in thread.frames)


def _in_hosted_acquire(thread: Thread) -> bool:
    """Blocked in a hosted lock's native acquire, called from serve_client itself."""
    python = [f for f in thread.frames if not f.native]
    native = [f for f in thread.frames if f.native]
    return bool(python) and python[0].name.rsplit(".", 1)[-1] == "serve_client" and any(
        "acquire_lock" in f.name for f in native)


def orphan_manager_lock(g: Graph) -> WaitPattern | None:
    if not g.has_file(_MANAGERS):
        return None
    for proc in g.snap.processes:
        if proc.is_exited:
            continue
        serving = [t for t in proc.threads if _serving(t)]
        waiters = sorted((t for t in serving if _in_hosted_acquire(t)), key=lambda t: t.tid)
        if not waiters:
            continue
        # The clients of the other serving threads: one of them, or a dead one, holds it.
        others = {e.to_pid for e in g.edges if e.pid == proc.pid and e.to_pid is not None
                  and e.tid in {t.tid for t in serving if t not in waiters}}
        holders = [g.procs[pid] for pid in sorted(others) if pid in g.procs]
        if any(not _blocked_for_good(g, p) for p in holders):
            continue  # a client that may be inside its critical section: it may release it
        clients, into = waits_into(g, proc.pid)
        verb = "waits" if len(waiters) == 1 else "wait"
        rest = ("; its other client" + ("s, " if len(holders) > 1 else ", ")
                + ", ".join(who(p) for p in holders)
                + (" is" if len(holders) == 1 else " are") + " blocked too, so if "
                + ("it holds" if len(holders) == 1 else "one holds") + " the lock it will "
                "not release it") if holders else ""
        chain = (f"{thread_names(waiters)} of {who(proc)}, a multiprocessing Manager, {verb} in "
                 "a hosted lock's acquire() for the clients they serve, and no live client is "
                 f"in a state to release it{rest}; most likely its holder is a client that "
                 "died holding it (a Manager never releases a lock for a client that "
                 "disconnects)")
        if into:
            chain += "; " + "; ".join(hop(g, i) for i in into)
        chain += ("; release in a finally, and do not kill a client inside its critical "
                  "section (or use a lock with an owner check or a lease)")
        return WaitPattern("orphan_wait", (proc.pid, *clients), chain, tuple(into), proc.pid,
                           waiters[0].tid)
    return None


def _blocked_for_good(g: Graph, proc: Process) -> bool:
    """Its working thread waits the whole window (on its children, a pipe, the manager)."""
    thread = proc.working_thread
    return thread is not None and blocked(thread) and any(e.pid == proc.pid for e in g.edges)
