"""The straggler that works: the others wait for a rank that is busy and moving (slow, not hung).

One row of the table in analyze/rules/, right before *straggler*: the same two sides (ranks that
wait in a collective, ranks busy elsewhere), but every busy rank's window shows work
(analyze/working.py): its calls come and go, it reads or writes data, its GPU computes. Then
nothing is hung: the waiting ranks will go on when it arrives (rank 0 preparing a dataset
behind ``main_process_first``). A busy rank that spins in one loop keeps the straggler verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangscope.analyze.facts import BUSY, GONE, WAITING, Facts
from hangscope.analyze.subject_lines import evidence
from hangscope.analyze.working import work_words
from hangscope.model import Group, Process, Severity, Verdict, VerdictKind
from hangscope.words import describe, short_who


@dataclass(frozen=True)
class Sides:
    """A straggler's two sides: who is busy, and the groups of each side."""

    busy: tuple[Process, ...]
    busy_groups: tuple[Group, ...]
    wait_groups: tuple[Group, ...]


def straggler_sides(facts: Facts) -> Sides | None:
    """Some ranks work (CPU, JIT, I/O) while the others wait for them in a collective."""
    waiting, categories = facts.waiting, facts.categories
    if not waiting or not all(p.key in facts.stuck for p in waiting):
        return None
    most_wait = len(waiting) >= len(facts.subjects) / 2
    busy = tuple(p for p in facts.subjects if categories[p.key] in BUSY or (
        most_wait and categories[p.key] not in WAITING and categories[p.key] not in GONE))
    if not busy:
        return None
    busy_keys = {p.key for p in busy}  # (host, PID): a busy rank's PID may wait on another node
    busy_groups = tuple(g for g in facts.groups if not busy_keys.isdisjoint(g.keys))
    chosen = {id(g) for g in busy_groups}
    return Sides(busy, busy_groups, tuple(g for g in facts.groups if id(g) not in chosen))


def working_straggler(facts: Facts) -> Verdict | None:
    """The ranks the others wait for all work (measured): slow, never a hang."""
    sides = straggler_sides(facts)
    if sides is None:
        return None
    proofs = [(p, work_words(facts.snapshot, p, facts.progress.get(p.key))) for p in sides.busy]
    if not all(words for _, words in proofs):
        return None
    works = "; ".join(f"{describe(g, facts.is_rank)}" for g in sides.busy_groups)
    why = "; ".join(words if len(proofs) == 1 else f"{short_who(p)}: {words}"
                    for p, words in proofs)
    seconds = facts.snapshot.progress.seconds if facts.snapshot.progress is not None else 0.0
    waits = "; ".join(describe(g, facts.is_rank) for g in sides.wait_groups)
    summary = (f"Slow, not hung: {works}, and works: over {seconds:.1f} s, {why}. "
               + waits[:1].upper() + waits[1:]
               + " for it, as they should: they go on when it arrives. If this takes longer "
               "than the collective timeout, raise it (init_process_group(timeout=...)) or do "
               "the work before the job starts.")
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary,
                   tuple(p.pid for p in sides.busy), evidence(facts),
                   tuple(p.host for p in sides.busy))
