"""Who in a cycle is its cause, and who only waits in it.

A pool worker idle in its library's task loop (``concurrent.futures.process._process_worker``,
``multiprocessing.pool.worker``, a DataLoader's ``_worker_loop``) waits for the task the cycle
holds back: it shares no blame with the member that holds the cycle (``co_suspects``).

A child that re-runs its parent's script is the member of a cycle that should not be in it.

A child started by spawn or the forkserver (a DataLoader's workers with either start method,
``mp.set_start_method("spawn")``, CUDA jobs) imports its parent's main module again before it
runs its target (``multiprocessing.spawn._fixup_main_from_path``, as ``__mp_main__``). Code at
the script's top level, outside ``if __name__ == "__main__":``, runs again there: a lock it
takes, a server it starts, a file it opens. Where that code waits on what the parent holds
while the parent waits on the child (a parent writing the child's start-up data while it holds
a cache lock the child's re-run takes: nicegui#6166), the child's re-run is the cause: the
fix is the guard, not the lock.
"""

from __future__ import annotations

from hangscope.analyze.graph.partners import idle_worker
from hangscope.analyze.graph.waitwalk import Graph
from hangscope.frameworks.multiprocessing import RERUNS_MAIN
from hangscope.model import Thread
from hangscope.words import who

RERUN_ADVICE = ("{child}, started by spawn or the forkserver, is still running its parent's "
                "script again (multiprocessing imports the main module once more in such a "
                "child, as __mp_main__), and that top-level code waits on what its parent "
                "holds: move the script's work under if __name__ == \"__main__\": (or out of "
                "the module's top level) so that the child only imports it")


def reruns_main(thread: Thread | None) -> bool:
    """The thread runs its parent's main module again, inside multiprocessing's spawn."""
    name, file = RERUNS_MAIN
    return thread is not None and any(
        not f.native and f.name == name and (f.file or "").endswith(file) for f in thread.frames)


def main_rerun(g: Graph, ring: list[int]) -> int | None:
    """The position in ``ring`` of the wait of a child that runs its parent's script again."""
    for k, i in enumerate(ring):
        edge = g.edges[i]
        proc = g.procs.get(edge.pid)
        thread = next((t for t in proc.threads if t.tid == edge.tid), None) if proc else None
        if reruns_main(thread):
            return k
    return None


def rerun_advice(g: Graph, ring: list[int]) -> str | None:
    """The cycle's advice where a member runs its parent's script again; None otherwise."""
    k = main_rerun(g, ring)
    return None if k is None else RERUN_ADVICE.format(child=who(g.procs[g.edges[ring[k]].pid]))


def co_suspects(g: Graph, members: tuple[int, ...]) -> tuple[int, ...]:
    """The members after the first that share its blame: not a worker idle in its task loop."""
    return tuple(m for m in members[1:] if not idle_worker(g.procs[m].working_thread))
