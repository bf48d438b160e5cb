"""A rank in a collective waits for the ranks of its group that are in none: wait-for edges.

A collective returns only once every rank of its group has called it. When ranks 0 and 2 wait
in ``all_reduce`` and rank 1 waits on something else (a full queue, a lock, a reply), ranks 0
and 2 wait for rank 1: that edge joins the collective to the rest of the wait-for graph, so a
chain that reaches rank 0 goes on to rank 1 and what rank 1 waits on, and a cycle through a
collective (rank 0 holds a file lock in ``barrier`` while rank 1's loader waits for that lock)
closes.

Only ranks that wait elsewhere are joined: a rank that runs (computes, compiles, reads a disk)
is the straggler rules' story (analyze/rules/slow.py), told with its progress. Ranks are
compared within their replica only (a DP replica's TP group: analyze/evidence/identity.py).
"""

from __future__ import annotations

from hangscope.analyze.evidence.identity import replica_key
from hangscope.model import Category, Process, Role, Snapshot, category_of
from hangscope.model.waits import WaitEdge

#: The waits a rank outside every collective can be in for its peers to wait on it.
_ELSEWHERE = frozenset({Category.LOCK, Category.IPC_WAIT, Category.SLEEP, Category.IDLE,
                        Category.SPIN})
_IN = frozenset({Category.COLLECTIVE, Category.COMM_INIT})


def collective_edges(snap: Snapshot) -> list[WaitEdge]:
    """rank in a collective -> each rank of its replica that waits, in no collective."""
    ranks: dict[tuple[tuple[str, int], ...], list[tuple[Process, Category]]] = {}
    for proc in snap.processes:
        if proc.role is not Role.RANK or proc.is_exited or proc.working_thread is None:
            continue
        category = category_of(proc, proc.working_thread)
        ranks.setdefault(replica_key(proc), []).append((proc, category))
    edges: list[WaitEdge] = []
    for members in ranks.values():
        waiting = [p for p, c in members if c is Category.COLLECTIVE]
        elsewhere = [p for p, c in members if c in _ELSEWHERE]
        if not waiting or not elsewhere or any(c not in _IN | _ELSEWHERE for _, c in members):
            continue  # nobody to wait for, or a rank that works: the straggler's story
        for proc in waiting:
            thread = proc.working_thread
            assert thread is not None
            op = thread.op or "a collective"
            for other in elsewhere:
                edges.append(WaitEdge(
                    proc.pid, thread.tid, "collective", f"{op} (rank {_rank(other)} has not "
                    "called it)", "a collective returns only once every rank of its group "
                    "calls it; this rank waits in it, that one in none", other.pid,
                    other.working_tid))
    return edges


def _rank(proc: Process) -> str:
    info = proc.rank
    return str(info.global_rank) if info is not None and info.global_rank is not None else "?"
