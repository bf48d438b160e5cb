"""Verdict rules from collective evidence (NCCL RAS, the Flight Recorder): rows of the rule table.

NCCL collectives are asynchronous: a rank's host does not wait inside ``all_reduce``, it waits
at its next sync or kernel launch, so its stack cannot say which collective it is in. The
collective evidence on the snapshot (``Snapshot.collectives``, analysed per node by
analyze/evidence/collectives.py) can: these rules come before the stack-based rule of the same kind
(analyze/rules/), and their verdict states both where each rank's host waits and what the
collective evidence says. Suspects are the PIDs NCCL or a dump named, never a helper process.
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.model import Role, Severity, Verdict, VerdictKind, rank_id
from hangscope.model import nccl as ev
from hangscope.words import describe, rank_set

#: Roles that are never the suspect of a collective verdict, whatever PID a source names.
HELPERS = HELPER_ROLES | {Role.LAUNCHER, Role.CONTROLLER}

_HEADING = {ev.MISMATCH: "Mismatched collectives", ev.MISSING: "Missing rank",
            ev.BEHIND: "Straggler"}
_KIND = {ev.MISMATCH: VerdictKind.MISMATCHED_COLLECTIVES, ev.MISSING: VerdictKind.MISSING_RANK,
         ev.BEHIND: VerdictKind.STRAGGLER}
_SOURCE = {ev.SOURCE_RAS: "NCCL RAS", ev.SOURCE_FR: "the Flight Recorder",
           "ras+fr": "NCCL RAS and the Flight Recorder"}


def conclusions(facts: Facts) -> list[ev.Conclusion]:
    """Every node's collective conclusions, each said once (a merged dump repeats a job's)."""
    seen: set[str] = set()
    out = []
    for item in facts.snapshot.collectives:
        for c in item.conclusions:
            if c.sentence not in seen:
                seen.add(c.sentence)
                out.append(c)
    return out


def suspects(facts: Facts, c: ev.Conclusion) -> tuple[int, ...]:
    """The conclusion's PIDs that are processes of this snapshot and not helpers."""
    out = []
    for pid in c.pids:
        proc = facts.snapshot.process(pid)
        if proc is not None and proc.role not in HELPERS and pid not in out:
            out.append(pid)
    return tuple(out)


def host_side(facts: Facts) -> str:
    """Where each rank's host waits, from the stacks: ``rank 0 waits for the GPU at ...``."""
    if not facts.groups:
        return ""
    return " Host stacks: " + "; ".join(describe(g, facts.is_rank) for g in facts.groups) + "."


def _host_lines(facts: Facts) -> tuple[str, ...]:
    lines = []
    for proc in facts.subjects:
        working = proc.working_thread
        where = f" at {working.site}" if working and working.site else ""
        cpu = f", CPU {proc.cpu_percent:.0f}%" if proc.cpu_percent is not None else ""
        lines.append(f"host of {rank_set([rank_id(proc)], proc.rank is not None)} "
                     f"(PID {proc.pid}): {facts.categories[proc.key]}{where}, "
                     f"state {proc.state or '?'}{cpu}")
    return tuple(lines)


def _settled(facts: Facts, c: ev.Conclusion) -> bool:
    """The ranks that wait (every live rank but the suspects; for a mismatch, every one) did
    not move: in a job that progresses, NCCL's counts and the recorder's sequence ids are a
    moment of an asynchronous pipeline (one rank a launch ahead), not a hang."""
    named = set() if c.kind == ev.MISMATCH else set(suspects(facts, c))
    return all(p.key in facts.stuck for p in facts.subjects
               if p.pid not in named and not p.is_exited)


def _verdict(facts: Facts, kind: str) -> Verdict | None:
    found = conclusions(facts)
    chosen = next((c for c in found if c.kind == kind), None)
    if chosen is None or not _settled(facts, chosen):
        return None
    heading = _HEADING[kind]
    sentence = chosen.sentence
    if not sentence.lower().startswith(heading.lower()):
        sentence = f"{heading}: {sentence}"
    others = tuple(f"{_SOURCE.get(c.source, c.source)}: {c.sentence}" for c in found
                   if c is not chosen)
    nccl = any(item.ras_status not in (None, ev.NO_NCCL) for item in facts.snapshot.collectives)
    lines = (f"collective evidence from {_SOURCE.get(chosen.source, chosen.source)}" + (
             " (NCCL collectives are asynchronous: a host waits at its next sync or launch, "
             "not inside the collective)" if nccl else ""), *others, *_host_lines(facts))
    return Verdict(_KIND[kind], Severity.CRITICAL, sentence + host_side(facts),
                   suspects(facts, chosen), lines)


def collective_mismatch(facts: Facts) -> Verdict | None:
    """The collective evidence names the first sequence where ranks issued different ops."""
    return _verdict(facts, ev.MISMATCH)


def collective_missing(facts: Facts) -> Verdict | None:
    """NCCL RAS has no data from a rank, or a Flight Recorder group member has no process."""
    return _verdict(facts, ev.MISSING)


def collective_behind(facts: Facts) -> Verdict | None:
    """A rank has not reached a collective the others launched (RAS op counts, FR sequence)."""
    return _verdict(facts, ev.BEHIND)


#: The rule functions above, so the verdict can be re-derived from the stacks alone.
FUNCTIONS = frozenset({collective_mismatch, collective_missing, collective_behind})


def agreement(verdict: Verdict, facts: Facts, stack_verdict: Verdict) -> Verdict:
    """Say in the evidence whether the host stacks and the collective evidence agree.

    ``stack_verdict``: the table's answer without the collective rows. Nothing is added when
    there is no collective conclusion."""
    found = conclusions(facts)
    if not found:
        return verdict
    if verdict is stack_verdict or verdict.summary == stack_verdict.summary:
        # The stacks decided: name each collective conclusion that points elsewhere.
        lines = [f"the collective evidence disagrees: {c.sentence}" for c in found
                 if _KIND[c.kind] is not verdict.kind
                 or set(suspects(facts, c)) != set(verdict.suspects)]
        return Verdict(verdict.kind, verdict.severity, verdict.summary, verdict.suspects,
                       (*lines, *verdict.evidence)) if lines else verdict
    same = (stack_verdict.kind == verdict.kind
            and set(stack_verdict.suspects) == set(verdict.suspects))
    line = ("the host stacks agree: " if same else
            "the host stacks alone would say otherwise (the collective evidence is the "
            "stronger for NCCL jobs): ") + stack_verdict.summary
    return Verdict(verdict.kind, verdict.severity, verdict.summary, verdict.suspects,
                   (verdict.evidence[0], line, *verdict.evidence[1:]))
