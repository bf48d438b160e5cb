"""Decide what is wrong with the job: run the rule table, then add what the launcher and GPUs do.

The rules themselves, in order, are the table in analyze/rules/ over the facts record of
analyze/evidence/facts.py: mismatched collectives -> missing rank -> straggler -> local deadlock ->
all waiting on the same thing -> progressing -> unknown. Every verdict names ranks and
carries the evidence a user can check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze.evidence.facts import facts_of
from hangscope.analyze.evidence.gpu import gpu_evidence
from hangscope.analyze.evidence.progress import DECIDED_BY
from hangscope.analyze.rules import RULES, decide
from hangscope.analyze.rules import collectives as rules_collectives
from hangscope.model import Group, Host, Process, Role, Snapshot, Verdict, subjects_of
from hangscope.words import verb


def _launcher_evidence(snap: Snapshot) -> list[str]:
    """What the launcher does: usually waiting on the ranks it started (one per node)."""
    lines: list[str] = []
    launchers = snap.of_roles(Role.LAUNCHER)
    if not launchers:
        return lines
    several = len({p.host for p in snap.processes}) > 1  # PIDs repeat: name the node
    for proc in launchers:
        # Its main thread says what it does (torchrun's agent loop, a Popen.wait): a helper
        # thread of it (a store server, a log pump) may be "more specific" but is not it.
        main = next((t for t in proc.threads if t.tid == proc.pid and t.frames
                     and t.category is not None), None)
        working = main or proc.working_thread
        category = main.category if main is not None and main.category else proc.category
        where = f" at {working.site}" if working and working.site else ""
        kids = ", ".join(str(c) for c in proc.children[:8])
        node = f" on {proc.host}" if several and proc.host else ""
        lines.append(f"launcher (PID {proc.pid}{node}) {verb(category)}"
                     f"{where}; its children: {kids or 'none'}")
    return lines


def with_suspect_hosts(verdict: Verdict, processes: Sequence[Process],
                       before: Verdict | None = None) -> Verdict:
    """Name the host of every suspect PID, so that a PID shared by ranks of other nodes does
    not make them suspects too.

    A rule that names hosts keeps them (``before``: the same suspects decided earlier, with
    hosts); otherwise a PID found on one host only is that host's, and a PID found on several
    stays host-less (None: the PID on any host, as older dumps read).
    """
    if len(verdict.suspect_hosts) == len(verdict.suspects):
        return verdict
    if before is not None and before.suspects == verdict.suspects \
            and len(before.suspect_hosts) == len(before.suspects):
        return replace(verdict, suspect_hosts=before.suspect_hosts)
    hosts_of: dict[int, set[str | None]] = {}
    for proc in processes:
        hosts_of.setdefault(proc.pid, set()).add(proc.host)
    hosts = []
    for pid in verdict.suspects:
        found = hosts_of.get(pid, set())
        hosts.append(next(iter(found)) if len(found) == 1 else None)
    return replace(verdict, suspect_hosts=tuple(hosts))


def with_gpu_evidence(verdict: Verdict, processes: Sequence[Process],
                      hosts: Sequence[Host]) -> Verdict:
    """Add one line per rank and GPU: utilisation, memory, and what GPU and host do together.

    Only GPUs NVML read get a line; without a driver the snapshot's note says so once.
    """
    lines = gpu_evidence(subjects_of(processes), processes, hosts)
    if not lines:
        return verdict
    return replace(verdict, evidence=(*verdict.evidence, *lines))


def diagnose(snap: Snapshot) -> tuple[Verdict, tuple[Group, ...]]:
    """The verdict for a snapshot whose processes are classified, the groups it rests on, and
    what the launcher does."""
    facts = facts_of(snap)
    verdict = decide(facts)
    if snap.collectives:  # say whether the host stacks and the collective evidence agree
        stacks = decide(facts, tuple(r for r in RULES
                                     if r.holds not in rules_collectives.FUNCTIONS))
        decided = verdict
        verdict = with_suspect_hosts(rules_collectives.agreement(verdict, facts, stacks),
                                     snap.processes, decided)
    verdict = with_suspect_hosts(verdict, snap.processes)
    extra = _launcher_evidence(snap)
    if snap.progress is not None and snap.progress.ranks:  # whatever the rule, say what decided
        kinds = "; ".join(sorted({DECIDED_BY[r.evidence] for r in snap.progress.ranks}))
        extra.append(f"progress measured over {snap.progress.seconds:.1f} s without pausing: "
                     f"{snap.progress.decision}, decided by {kinds}")
    if extra:
        verdict = replace(verdict, evidence=(*verdict.evidence, *extra))
    return verdict, facts.groups
