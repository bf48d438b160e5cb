"""One diagnosis of a job that spans several nodes: the nodes' snapshots analysed as one job.

What ``hangscope merge A.json B.json`` and ``hangscope dump --nodes ...`` both run. Processes
are keyed by (host, PID), never by PID alone: PIDs repeat across nodes (every container's or
PID namespace's ranks start near 1). The nodes' raw readings are judged again as one job
(``analyze``), and the verdict names the nodes (``node_verdict``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze import analyze
from hangscope.analyze.evidence.progress import merge_progress
from hangscope.errors import UsageError
from hangscope.model import Category, Job, Process, Readings, Role, Snapshot, VerdictKind
from hangscope.words import compact_ranks


def _with_host(snap: Snapshot, node: str | None) -> tuple[Process, ...]:
    """Every process names its host: older dumps may not, so the node (or the dump's host)
    stands in."""
    fallback = node or (snap.hosts[0].name if snap.hosts else None)
    if fallback is None or all(p.host for p in snap.processes):
        return snap.processes
    return tuple(p if p.host else replace(p, host=fallback) for p in snap.processes)


def _with_reading_host(reading: Readings, snap: Snapshot, node: str | None) -> Readings:
    """A node's readings name its host, as its processes do (``_with_host``)."""
    if reading.host is not None:
        return reading
    return replace(reading, host=node or (snap.hosts[0].name if snap.hosts else None))


def _job(snapshots: Sequence[Snapshot], processes: Sequence[Process]) -> Job:
    """The job of all nodes: the launcher of the first, ranks expected from WORLD_SIZE."""
    first = snapshots[0].job
    expected = [s.job.expected_ranks for s in snapshots]
    total = sum(e for e in expected if e is not None) if all(
        e is not None for e in expected) else None
    sources = sorted({s.job.expected_source for s in snapshots if s.job.expected_source})
    source = (" + ".join(sources) + f" on {len(snapshots)} nodes") if sources else None
    # A rank's WORLD_SIZE counts the ranks of every node, answered or not: the better number.
    worlds = {p.rank.world_size for p in processes if p.rank and p.rank.world_size}
    if len(worlds) == 1:
        world = worlds.pop()
        if total is None or world > total:
            total, source = world, f"WORLD_SIZE={world}"
    return Job(launcher=first.launcher, target=first.target, kind=first.kind,
               expected_ranks=total, expected_source=source, args=dict(first.args))


def _is_rank(proc: Process) -> bool:
    return proc.role in (Role.RANK, Role.ENGINE_CORE) and proc.is_rank_numbered


def _by_node(ranks: Sequence[int], host_of: dict[int, str]) -> str:
    """``node01 ranks 0-1, node03 rank 4``."""
    per: dict[str, list[int]] = {}
    for rank in ranks:
        per.setdefault(host_of.get(rank, "?"), []).append(rank)
    return ", ".join(f"{host} rank{'s' if len(rs) > 1 else ''} {compact_ranks(rs)}"
                     for host, rs in per.items())


def _what(group_op: str | None, category: object) -> str:
    return f"in {group_op}" if group_op else f"in {category}"


def node_verdict(snap: Snapshot, unanswered: Sequence[tuple[str, str]] = ()) -> Snapshot:
    """Name the nodes in the verdict; say which nodes did not answer and what is unknown."""
    verdict = snap.verdict
    if verdict is None:
        return snap
    ranks = [p for p in snap.processes if _is_rank(p)]
    host_of = {p.rank.key: p.host or "?" for p in ranks if p.rank and p.rank.key is not None}
    hosts = sorted({p.host or "?" for p in snap.processes})
    summary, evidence = verdict.summary, list(verdict.evidence)
    node_lines = []
    several = len(hosts) > 1 or bool(unanswered)  # one node's dump says what it said alone
    if several:
        for group in snap.groups:
            if all(r in host_of for r in group.ranks):
                where = f" at {group.site}" if group.site else ""
                node_lines.append(f"{_what(group.op, group.category)}{where}: "
                                  f"{_by_node(group.ranks, host_of)}")
    if several and verdict.kind == VerdictKind.MISMATCHED_COLLECTIVES:
        # STAT's sentence: the odd group by node, then how many are in the others (launchers
        # and helpers waiting on their children are not part of the mismatch).
        ordered = sorted((g for g in snap.groups if g.category == Category.COLLECTIVE),
                         key=lambda g: len(g.ranks))
        odd, rest = (ordered[0], ordered[1:]) if len(ordered) > 1 else (None, [])
        others = sum(len(g.ranks) for g in rest)
        if odd is not None and all(r in host_of for r in odd.ranks):
            many = len(odd.ranks) > 1
            theirs = ", ".join(_what(g.op, g.category)[3:] for g in rest)
            # "the other 1 in all_gather" reads as a typo: one other rank is named as one
            rest_ranks = [r for g in rest for r in g.ranks]
            them = (f"rank {rest_ranks[0]} in {theirs}" if others == 1
                    else f"the other {others} in {theirs}")
            lead = (f"{'Ranks' if many else 'Rank'} {compact_ranks(odd.ranks)} on "
                    f"{', '.join(dict.fromkeys(host_of[r] for r in odd.ranks))} "
                    f"{'are' if many else 'is'} {_what(odd.op, odd.category)}, {them}.")
            summary = f"{lead} {summary}"
    if unanswered:
        seen = sorted(host_of)
        answered = len(hosts)
        missing = ", ".join(f"{node}: {why}" for node, why in unanswered)
        expected = snap.job.expected_ranks
        unseen = sorted(set(range(expected)) - set(seen)) if expected else []
        unknown = (f" {'Ranks' if len(unseen) > 1 else 'Rank'} {compact_ranks(unseen)} "
                   f"{'are' if len(unseen) > 1 else 'is'} unknown." if unseen else "")
        partial = (f"{answered} of {answered + len(unanswered)} nodes answered; {missing}. "
                   f"This verdict is drawn from ranks {compact_ranks(seen)} only.{unknown}")
        summary = f"{summary.rstrip('.')}. ({partial})"  # never "..", the summary's own "."
        evidence.insert(0, partial)
    evidence[0:0] = node_lines
    return replace(snap, verdict=replace(verdict, summary=summary, evidence=tuple(evidence)))


def merge(snapshots: list[Snapshot], nodes: Sequence[str | None] | None = None,
          unanswered: Sequence[tuple[str, str]] = ()) -> Snapshot:
    """Concatenate the nodes' processes, keyed by (host, PID), and analyse them as one job.

    ``nodes`` names the node each snapshot came from (for dumps that do not name their host);
    ``unanswered`` lists (node, why) for the nodes that sent nothing.

    Raises:
        UsageError: no snapshot at all.
    """
    if not snapshots:
        raise UsageError("Give at least one dump file to merge.")
    names = list(nodes) if nodes is not None else [None] * len(snapshots)
    seen: set[tuple[str | None, int]] = set()
    processes = []
    for snap, node in zip(snapshots, names, strict=True):
        for proc in _with_host(snap, node):
            key = (proc.host, proc.pid)
            if key not in seen:  # the same node dumped twice (e.g. as itself and by name)
                seen.add(key)
                processes.append(proc)
    hosts = {h.name: h for s in snapshots for h in s.hosts}
    first = snapshots[0]
    # Every node's raw readings, for the analysis to judge again as one job; one node without
    # them (an older dump) keeps every node's stored conclusions instead.
    readings = (tuple(_with_reading_host(r, s, node) for s, node in zip(snapshots, names,
                                                                        strict=True)
                      for r in s.readings)
                if all(s.readings for s in snapshots) else ())
    merged = replace(
        first, hosts=tuple(hosts.values()), job=_job(snapshots, processes),
        processes=tuple(processes),
        samples=min(s.samples for s in snapshots),
        window_s=min(s.window_s for s in snapshots),
        notes=tuple(dict.fromkeys(n for s in snapshots for n in s.notes)),
        redacted=all(s.redacted for s in snapshots),
        collectives=tuple(c for s in snapshots for c in s.collectives),  # one per node
        progress=merge_progress([s.progress for s in snapshots], [p.pid for p in processes]),
        # /proc/locks and --locals are keyed by PIDs of one node: not across nodes (yet).
        waits=first.waits if len(snapshots) == 1 else None,
        readings=readings,
    )
    return node_verdict(analyze(merged), unanswered)
