"""Ranks that call one op with arguments they disagree on: the rendezvous's address, a root.

Each rank inside ``init_process_group`` creates (the one that hosts it) or connects to the
job's TCPStore at the ``host:port`` its rendezvous was given (``MASTER_ADDR``/``MASTER_PORT``,
an ``init_method`` URL); ``py-spy dump --locals`` of such a rank reads them
(analyze/evidence/world.py ``init_store``). Where the ranks name different addresses, each
store waits for ranks that went to another: a script that picks "a free port" in every
process (Lightning#3957, pytorch#53395), a node whose environment names another master. The
rank that hosts a store listens on its port (a kernel fact); a rank whose address no process
of the job listens on retries its connect for ever: it is the one to fix.

Ranks stuck in one collective with a single root (a broadcast, a scatter, a gather) whose
calls name different roots (their ``src``/``dst``, read the same way) wait for each other's
root: a resume whose every rank found a snapshot on its own disk and made itself the source.
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import Facts, by_key
from hangscope.model import Category, Process, Severity, Verdict, VerdictKind, rank_id
from hangscope.model.waits import port_of
from hangscope.words import rank_set, who


def _names(procs: list[Process], is_rank: bool) -> str:
    """``ranks 0-1`` (or ``PIDs ...``) of ``procs``."""
    return rank_set(sorted(rank_id(p) for p in procs), is_rank)


def split_rendezvous(facts: Facts) -> Verdict | None:
    """Two or more ranks stuck in communicator init whose stores' addresses differ."""
    waits = facts.snapshot.waits
    if waits is None:
        return None
    reads = by_key(facts.processes, [r for r in waits.locals if r.init_store])
    ranks = [p for p in facts.subjects if p.rank is not None and p.key in facts.stuck
             and facts.categories[p.key] is Category.COMM_INIT and p.key in reads]
    stores = {p.key: reads[p.key].init_store or "" for p in ranks}
    if len(ranks) < 2 or len(set(stores.values())) < 2:
        return None
    # the ports a process of the job listens on: the stores the job hosts, and by whom
    host_of = {s.port: p for p in facts.processes for s in p.listening if s.port}
    listening = set(host_of)
    is_rank = facts.is_rank
    parts = []
    by_store: dict[str, list[Process]] = {}
    for proc in ranks:
        by_store.setdefault(stores[proc.key], []).append(proc)
    for address, procs in sorted(by_store.items(), key=lambda kv: min(map(rank_id, kv[1]))):
        host = host_of.get(port_of(address))
        verb = "wait" if len(procs) > 1 else "waits"
        hoster = (_names([host], is_rank) if host in procs else who(host)) if host else ""
        where = (f" at {address}, where no process of the job listens" if host is None
                 else f" at {address}, the store {hoster} hosts")
        parts.append(f"{_names(procs, is_rank)} {verb}{where}")
    unserved = [p for p in ranks if port_of(stores[p.key]) not in listening]
    # A rank retrying a store nobody serves is the one that went astray; where every store
    # is served (two masters), the smaller group is.
    groups = sorted(by_store.values(), key=len)
    suspects = unserved or (groups[0] if len(groups[0]) < len(groups[-1]) else ranks)
    summary = (f"Split rendezvous: the ranks look for the job's TCPStore at different "
               f"addresses: {'; '.join(parts)}. They will never meet: each store waits for "
               "ranks that went to another. Give every rank the same MASTER_ADDR and MASTER_PORT "
               "(set the port once, before the ranks start, not in each process).")
    lines = tuple(f"{_names([p], is_rank)}: its rendezvous's store at {stores[p.key]} "
                  "(py-spy --locals of _create_c10d_store)" for p in ranks)
    return Verdict(VerdictKind.MISMATCHED_COLLECTIVES, Severity.CRITICAL, summary,
                   tuple(p.pid for p in suspects), lines,
                   suspect_hosts=tuple(p.host for p in suspects))


def mismatched_roots(facts: Facts) -> Verdict | None:
    """Two or more ranks stuck in the same collective with one root (a broadcast, a gather)
    whose roots differ (their ``--locals``: each call's ``src`` or ``dst``): each waits for a
    root the others do not name, and none completes (a resume that picks its source from a
    rank's own disk; a root computed per rank)."""
    waits = facts.snapshot.waits
    if waits is None:
        return None
    reads = by_key(facts.processes, [r for r in waits.locals if r.root is not None])
    ranks = [p for p in facts.subjects if p.rank is not None and p.key in facts.stuck
             and facts.categories[p.key] is Category.COLLECTIVE and p.key in reads
             and (t := p.working_thread) is not None and t.op]
    ops = {p.working_thread.op for p in ranks if p.working_thread is not None}
    roots = {p.key: reads[p.key].root for p in ranks}
    if len(ranks) < 2 or len(ops) != 1 or len(set(roots.values())) < 2:
        return None
    op = ops.pop()
    is_rank = facts.is_rank
    by_root: dict[int, list[Process]] = {}
    for proc in ranks:
        by_root.setdefault(roots[proc.key] or 0, []).append(proc)
    parts = "; ".join(
        f"{_names(procs, is_rank)} {'name' if len(procs) > 1 else 'names'} rank {root}"
        for root, procs in sorted(by_root.items()))
    site = next((t.site for p in ranks if (t := p.working_thread) is not None and t.site), None)
    at = f" at {site}" if site else ""
    summary = (f"Mismatched roots: {_names(ranks, is_rank)} wait "
               f"in {op}{at} with different roots: {parts}. A {op} completes only when every "
               "rank names the same root: decide it once (on one rank, then broadcast it) "
               "instead of on each rank from its own state.")
    lines = tuple(f"{_names([p], is_rank)}: {op} with root {roots[p.key]} "
                  "(py-spy --locals)" for p in ranks)
    return Verdict(VerdictKind.MISMATCHED_COLLECTIVES, Severity.CRITICAL, summary,
                   tuple(p.pid for p in ranks), lines,
                   suspect_hosts=tuple(p.host for p in ranks))
