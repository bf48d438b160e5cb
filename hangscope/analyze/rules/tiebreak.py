"""Break a tie between stuck ranks of one replica with what the other replicas do.

Two ranks of DP1 wait in different collectives, one each: no majority inside DP1 says which
side is wrong. The other replicas run the same code: the collective (op and call site) they
wait in now, or that the progress recorder's dense samples saw them pass through, is the
normal path; the tied side that is not on it is the suspect.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.identity import rank_label, replica_key
from hangscope.analyze.evidence.progress_sites import signature
from hangscope.model import Category, Group, Process


def _normal_path(facts: Facts, members: Sequence[Process]) -> dict[str, list[Process]]:
    """Collective signature -> the ranks of other replicas seen in it (now or while watched)."""
    key = replica_key(members[0])
    if not key:
        return {}  # no replicas: nobody outside the compared ranks runs the same code
    seen: dict[str, list[Process]] = {}
    for proc in facts.subjects:
        if replica_key(proc) == key or not replica_key(proc):
            continue
        sigs: list[str] = []
        working = proc.working_thread
        if working is not None and working.category is Category.COLLECTIVE and working.op:
            sigs.append(signature(working.op, working.site))
        measured = facts.progress.get(proc.key)
        if measured is not None:
            sigs.extend(measured.seen)
        for sig in dict.fromkeys(sigs):
            seen.setdefault(sig, []).append(proc)
    return seen


def break_tie(facts: Facts, members: Sequence[Process],
              tied: Sequence[Group]) -> tuple[Group, str] | None:
    """The tied group on the other replicas' path, and the sentence that says so; None when
    the other replicas show no path, or show more than one of the tied groups'."""
    path = _normal_path(facts, members)
    normal = [g for g in tied if g.op and signature(g.op, g.site) in path]
    if len(normal) != 1:
        return None
    group = normal[0]
    sig = signature(group.op or "", group.site)
    who = ", ".join(rank_label(p) for p in path[sig][:8])
    return group, (f"The other replicas ({who}) run {sig} too: that is the normal path")
