"""Who waits behind a pattern of the wait-for graph: the processes whose waits lead into it, and
the ranks that sit in a collective for them.

Pure, over analyze/graph/waitwalk.py's Graph. A deadlock's or a dead end's sentence names its own
members; what a user sees first is often elsewhere (ranks in a broadcast, request threads on a
logging lock), so each pattern says what waits behind it, in the same words as its chain.
"""

from __future__ import annotations

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.graph.waitwalk import Graph, hop
from hangscope.model import Category
from hangscope.words import who

#: At most this many chains into a pattern are said (a 1,000-rank job: the first ones tell).
_SHOWN = 3


def behind(g: Graph, members: tuple[int, ...]) -> str:
    """``; rank 1 (PID 7) is blocked on the FLOCK lock on x, which PID 5 holds; ranks 0, 2
    wait in broadcast for it``: each chain of waits from outside ``members`` into them, up to
    the first member, and the ranks in a collective for the processes those chains start at."""
    # A helper's wait (the resource tracker reading the pipe every process of the job holds)
    # is how it always waits: nobody waits behind the pattern there.
    starts = [(p.pid, None) for p in g.snap.processes if p.pid not in members
              and not p.is_exited and p.role not in HELPER_ROLES] + list(dict.fromkeys(
                  (e.pid, e.tid) for e in g.edges if e.kind in ("py_lock", "gil")
                  and e.pid not in members))
    chains: list[tuple[list[int], list[int]]] = []  # (first edge of each head, the rest)
    entered: list[int] = []
    for pid, tid in starts:
        path, _ = g.walk(pid, tid)
        cut = next((k for k, i in enumerate(path) if g.edges[i].to_pid in members), None)
        if cut is None:
            continue
        head, rest = path[0], path[1:cut + 1]
        # Two ranks in all_reduce for the same rank, whose own chain follows once: one chain,
        # its first hop said for the first of them and "so does" the others.
        same = next((c for c in chains if c[1] == rest and g.edges[c[0][0]].to_pid
                     == g.edges[head].to_pid and g.edges[c[0][0]].kind == g.edges[head].kind),
                    None)
        if same is not None:
            same[0].append(head)
            entered.append(pid)
            continue
        clause = "; ".join(hop(g, i) for i in path[:cut + 1])
        if any(clause in _said(g, c) for c in chains):
            continue
        chains.append(([head], rest))
        entered.append(pid)
        if len(chains) >= _SHOWN:
            break
    if not chains:
        return ""
    return "; " + "; ".join(_said(g, c) for c in chains) + collective_behind(g, entered)


def _said(g: Graph, chain: tuple[list[int], list[int]]) -> str:
    heads, rest = chain
    first = hop(g, heads[0])
    if len(heads) > 1:
        others = [who(g.procs[g.edges[i].pid]) for i in heads[1:]]
        first += f" (so {'does' if len(others) == 1 else 'do'} {' and '.join(others)})"
    return "; ".join([first, *(hop(g, i) for i in rest)])


def collective_behind(g: Graph, waiters: list[int]) -> str:
    """``; rank 1 (PID 5) and rank 2 (PID 6) wait in barrier for them``: the job's other ranks
    sit in a collective that the waiting ranks, blocked outside any, never join."""
    ranked = [g.procs[w] for w in waiters if g.procs[w].rank is not None]
    if not ranked:
        return ""
    behind, ops = [], []
    for proc in g.snap.processes:
        working = next((t for t in proc.threads if t.tid == proc.working_tid), None)
        if (proc.is_exited or proc.rank is None or proc.pid in waiters or working is None
                or working.category is not Category.COLLECTIVE):
            continue
        behind.append(proc)
        ops.append(working.op or "a collective")
    if not behind:
        return ""
    shown = [who(p) for p in behind[:4]] + (
        [f"{len(behind) - 4} more"] if len(behind) > 4 else [])
    names = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    op = ops[0] if len(set(ops)) == 1 else "collectives"
    them = who(ranked[0]) if len(ranked) == 1 else "them"
    return (f"; {names} {'wait' if len(behind) > 1 else 'waits'} in {op} for {them}, which "
            "is in no collective")
