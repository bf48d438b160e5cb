"""A collective that one rank skipped: most ranks wait in it, the odd ones wait on the store.

A rank waiting in a c10d store call (``TCPStore::wait``/``get``: a barrier of its own, an
"epoch done" key, ``destroy_process_group``'s store barrier) while the others of its group wait
inside a collective has left the path the collective is on: it finished its loop early (uneven
inputs) or took another branch, and the collective can complete only with it. The store's
owner (often rank 0) is one of the ranks waiting in the collective, so the wait-for graph's
chain (store waiter -> store owner) would end at the owner; the odd rank is the cause.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.evidence.facts import Facts, by_key
from hangscope.analyze.evidence.group import group_ranks
from hangscope.analyze.evidence.identity import comparable_groups
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.analyze.rules.leftloop import left_loop
from hangscope.model import (
    Category,
    Process,
    Role,
    Severity,
    Thread,
    Verdict,
    VerdictKind,
    rank_id,
)
from hangscope.words import describe, group_names, rank_set

_INIT = ("init_process_group", "rendezvous", "_store_based_barrier", "new_group",
         "init_device_mesh")


def store_wait(thread: Thread | None) -> bool:
    """Blocked in a c10d store wait or get outside communicator init (the rendezvous's
    own store waits are init: the group is not formed yet)."""
    if thread is None:
        return False
    native = any(f.native and ("TCPStore::wait" in f.name or "TCPStore::get" in f.name
                               or "TCPStore::doWait" in f.name) for f in thread.frames)
    if not native:
        native = any(not f.native and f.file and "torch/distributed" in f.file
                     and f.name.rsplit(".", 1)[-1] in ("get", "wait") and "store" in f.name.lower()
                     for f in thread.frames[:12])
    return native and not any(not f.native and f.name.rsplit(".", 1)[-1] in _INIT
                              for f in thread.frames)


def _keys(facts: Facts, procs: Sequence[Process]) -> dict[int, tuple[str, ...]]:
    """PID -> the store keys its wait names (py-spy --locals of its frame), where read."""
    waits = facts.snapshot.waits
    if waits is None:
        return {}
    found = by_key(facts.processes, [r for r in waits.locals if r.store_keys])
    return {p.pid: found[p.key].store_keys for p in procs if p.key in found}


def _in_collective(facts: Facts, proc: Process) -> bool:
    thread = proc.working_thread
    return facts.categories[proc.key] is Category.COLLECTIVE and thread is not None \
        and not is_p2p(thread.op)


def skipped_collective(facts: Facts) -> Verdict | None:
    """Most ranks of a group wait in a collective; the rest wait on the c10d store."""
    ranks = [p for p in facts.subjects if p.role is Role.RANK and p.key in facts.stuck]
    for members in comparable_groups(ranks):
        verdict = _skipped(facts, members)
        if verdict is not None:
            return verdict
    return None


def _skipped(facts: Facts, members: Sequence[Process]) -> Verdict | None:
    # One test per member: ``p not in inside`` compared each rank with every rank before it
    # (a dataclass __eq__ each: 4,096 ranks all waiting took 10 s, 131,072 hours). A member
    # equal to one inside would be inside too (the test reads only its fields).
    inside: list[Process] = []
    rest: list[Process] = []
    for p in members:
        (inside if _in_collective(facts, p) else rest).append(p)
    odd = [p for p in rest if store_wait(p.working_thread)]
    if not odd or len(inside) < len(odd) or len(inside) + len(odd) != len(members):
        return None
    is_rank = facts.is_rank
    waiting = group_ranks(inside)
    keys = _keys(facts, odd)
    odd_groups = group_ranks(odd)
    sites = "; ".join(f"{group_names(g, is_rank)} {'waits' if len(g.ranks) == 1 else 'wait'} "
                      "on the c10d store (TCPStore wait/get)"
                      + (f" for {' and '.join(map(repr, keys[g.pids[0]]))}"
                         if keys.get(g.pids[0]) else "")
                      + (f" at {g.site}" if g.site else "")
                      for g in odd_groups)
    summary = ("Mismatched collectives: " + "; ".join(describe(g, is_rank) for g in waiting)
               + f", while {sites}, in no collective")
    tie = len(inside) == len(odd)
    sides = [*waiting, *odd_groups]
    left = left_loop(facts, sides) if tie and len(sides) == 2 else None
    if left is not None and left[0] is sides[0]:
        # Its stack says it left the loop the others still run: it skipped, not they.
        summary += (f": {left[1]}. The odd one out is "
                    f"{rank_set([rank_id(p) for p in odd], is_rank)}.")
        suspects = odd
    elif tie:
        # Two ranks, one in each: skipping a collective and entering one the other never
        # calls (an `if rank == 0:` branch) look the same; no majority says which.
        summary += (": either it skipped the collective the others wait in, or they entered "
                    "one it never calls. The groups are the same size: no majority says which "
                    "side is wrong.")
        if keys:  # the key names where to look: who sets it, under which name
            summary += (" Nobody set the key it waits for, and the ranks that could are "
                        "inside the collective: look where it is set, and under which name (a "
                        "PrefixStore prepends its prefix; a rank or step in the name may be "
                        "computed differently).")
        suspects = [*odd, *inside]
    else:
        summary += (": it skipped the collective the others wait in (it left its loop early, "
                    "as with uneven inputs per rank, or took another branch), so they wait "
                    f"for it. The odd one out is {rank_set([rank_id(p) for p in odd], is_rank)}.")
        suspects = odd
    lines = tuple(f"{g.signature}: {group_names(g, is_rank)}" for g in group_ranks(members))
    return Verdict(VerdictKind.MISMATCHED_COLLECTIVES, Severity.CRITICAL, summary,
                   tuple(p.pid for p in suspects), lines, tuple(p.host for p in suspects))
