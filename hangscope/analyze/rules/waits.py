"""Verdict rules on wait-for evidence: file locks, point-to-point peers, a compile in progress.

Each is a rule of the table in analyze/rules/ (``(Facts) -> Verdict | None``); the evidence comes
from ``Snapshot.waits`` (/proc/locks, py-spy ``--locals``) through the facts record.
"""

from __future__ import annotations

from datetime import datetime

from hangscope.analyze.evidence.compiling import CompileActivity, describe_compile
from hangscope.analyze.evidence.facts import Facts, unique_keys
from hangscope.analyze.evidence.locks import describe_lock_wait
from hangscope.analyze.evidence.p2p import describe_cycle, describe_points_at, p2p_graph
from hangscope.analyze.evidence.roles import is_helper_role
from hangscope.analyze.evidence.working import progressing_pids
from hangscope.model import Category, Process, Severity, Verdict, VerdictKind
from hangscope.words import describe, rank_set, who, who_many


def _by_rank(facts: Facts) -> dict[int, Process]:
    return {p.rank.global_rank: p for p in facts.subjects
            if p.rank is not None and p.rank.global_rank is not None}


def _where(proc: Process) -> str:
    """``in sleep at build_kernel (job.py:49)``, ``exited``: where a process is."""
    category = proc.category
    thread = proc.working_thread
    if category in (Category.DEAD, Category.ZOMBIE):
        return "exited" + (f" with code {proc.exit_code}" if proc.exit_code is not None else "")
    site = f" at {thread.site}" if thread is not None and thread.site else ""
    if category is Category.COLLECTIVE and thread is not None and thread.op:
        # "waits in barrier", a call the peers never make: the op says why nobody meets it
        return f"waiting in {thread.op}{site}"
    return f"in {category}{site}"


def _lines(facts: Facts, pids: tuple[int, ...]) -> tuple[str, ...]:
    by_pid = {p.pid: p for p in facts.processes}
    return tuple(f"{who(by_pid[pid])}: {_where(by_pid[pid])}" for pid in pids if pid in by_pid)


def p2p_deadlock(facts: Facts) -> Verdict | None:
    """Stuck ranks wait for each other in send/recv around a cycle (read from their locals)."""
    calls = facts.p2p_calls
    if len(calls) < 2:
        return None
    ranks = _by_rank(facts)
    graph = p2p_graph(calls, sorted(ranks))
    cycles = [c for c in graph.cycles if all(ranks[r].key in facts.stuck for r in c)]
    if not cycles:
        return None
    summary = " ".join(describe_cycle(c, calls) for c in cycles)
    suspects = tuple(ranks[r].pid for c in cycles for r in c)
    return Verdict(VerdictKind.P2P_DEADLOCK, Severity.CRITICAL, summary, suspects,
                   _lines(facts, suspects),
                   suspect_hosts=tuple(ranks[r].host for c in cycles for r in c))


def p2p_points_at(facts: Facts) -> Verdict | None:
    """Stuck ranks wait to send to or receive from a rank that is elsewhere (or not there)."""
    calls = facts.p2p_calls
    if not calls:
        return None
    ranks = _by_rank(facts)
    graph = p2p_graph(calls, sorted(ranks))
    for waiters, peer in graph.points_at:
        if not all(ranks[r].key in facts.stuck for r in waiters):
            continue
        target = ranks.get(peer)
        where = _where(target) if target is not None else None
        summary = "Point-to-point wait: " + describe_points_at(waiters, peer, calls, where)
        if target is None:  # nobody is there to send: a missing rank
            return Verdict(VerdictKind.MISSING_RANK, Severity.CRITICAL, summary,
                           tuple(p.pid for p in facts.launchers),
                           _lines(facts, tuple(ranks[r].pid for r in waiters)))
        return Verdict(VerdictKind.STRAGGLER, Severity.CRITICAL, summary, (target.pid,),
                       _lines(facts, (target.pid, *(ranks[r].pid for r in waiters))),
                       suspect_hosts=(target.host,))
    return None


def recv_any_source(facts: Facts) -> Verdict | None:
    """A rank waits to receive from any source while no other rank sends: every other rank
    of the world is stuck elsewhere (a collective, a wait of its own) or exited, past every
    send it was going to make, so the message never comes."""
    calls = facts.p2p_calls
    ranks = _by_rank(facts)
    waiting = sorted(r for r, c in calls.items() if c.op == "recv" and c.peer is None
                     and c.group_peer is None and c.group is None
                     and r in ranks and ranks[r].key in facts.stuck)
    others = [p for r, p in sorted(ranks.items()) if r not in waiting]
    if not waiting or not others or any(p.key not in facts.stuck for p in others) or any(
            ((t := p.working_thread) is not None and t.op in ("send", "isend"))
            or ((c := calls.get(r)) is not None and c.op == "send")
            for r, p in ranks.items() if r not in waiting):
        return None
    is_rank = facts.is_rank
    head = rank_set(waiting, is_rank)
    one = len(waiting) == 1
    sites = dict.fromkeys(t.site for r in waiting
                          if (t := ranks[r].working_thread) is not None and t.site)
    at = f" at {', '.join(sites)}" if sites else ""
    rest = "; ".join(describe(g, is_rank) for g in facts.groups
                     if {ranks[r].key for r in waiting}.isdisjoint(g.keys))
    summary = (f"Mismatched: {head} {'waits' if one else 'wait'} in recv from any source{at}, "
               f"and no rank sends: {rest}. Every other rank has moved past the sends it "
               f"was going to make, so the message {head} {'waits' if one else 'wait'} for "
               "was never sent: a rank skipped its send (a branch, an empty shard, an early "
               f"return) or {head} counts more messages than the ranks send. The odd one out "
               f"is {head}; find the rank whose send was skipped (its log, or what {head} "
               "received so far).")
    suspects = tuple(ranks[r].pid for r in waiting)
    return Verdict(VerdictKind.MISMATCHED_COLLECTIVES, Severity.CRITICAL, summary, suspects,
                   _lines(facts, (*suspects, *(p.pid for p in others))),
                   suspect_hosts=tuple(ranks[r].host for r in waiting))


def lock_wait(facts: Facts) -> Verdict | None:
    """Ranks wait for a file lock (flock, fcntl, a polling filelock) that another process holds.
    Not where the window saw the holder progress: a lock held across work that moves (a
    download into a shared cache, a build) is waited for, slowly (rules/slow.py says so)."""
    going = progressing_pids(facts.snapshot)
    waits = [w for w in facts.lock_waits if w.holder not in going
             and any(k in facts.stuck for pid in w.waiters
                     for k in unique_keys(facts.processes, pid))]
    if not waits:
        return None
    outside = facts.outside
    summary = "Lock wait: " + "; ".join(describe_lock_wait(w, facts.processes, outside)
                                        for w in waits) + "."
    by_pid = {p.pid: p for p in facts.processes}
    # A holder outside the job that the kernel named and we read is the suspect as well.
    holders = tuple(dict.fromkeys(
        pid for w in waits for pid in ((w.holder,) if w.holder else w.candidates)
        if (pid in by_pid and not is_helper_role(by_pid[pid].role)) or pid in outside))
    # Its waiters are where the job meets that outside holder: the suspects of the job.
    holders += tuple(dict.fromkeys(pid for w in waits if w.holder in outside
                                   for pid in w.waiters if pid not in holders))
    return Verdict(VerdictKind.LOCK_WAIT, Severity.CRITICAL, summary, holders,
                   _lines(facts, (*holders, *(pid for w in waits for pid in w.waiters))))


def _epoch(created: str) -> float | None:
    try:
        return datetime.fromisoformat(created).timestamp()
    except ValueError:
        return None


#: While one process compiles, the others may wait for it, sleep, or be idle: not work.
_NOT_WORK = frozenset({Category.RUNNING, Category.SPIN, Category.IO})


def compiling(facts: Facts) -> Verdict | None:
    """Main or a rank compiles (torch.compile, Triton) while the other subjects wait, or alone."""
    active = facts.compiles
    if not active:
        return None
    pids = {a.pid for a in active}
    others = [g for g in facts.groups if pids.isdisjoint(g.pids)]
    if any(g.category in _NOT_WORK for g in others):
        return None  # another rank does work of its own: the straggler rule tells
    abandoned = _abandoned_build(facts, active)
    if abandoned is not None:
        return abandoned
    now = _epoch(facts.snapshot.created)
    summary = "Compiling: " + "; ".join(describe_compile(a, facts.processes, now)
                                        for a in active)
    if others:
        summary += ", while " + "; ".join(describe(g, facts.is_rank) for g in others)
    summary += (". A compile is work, not yet a hang: if it lasts much longer than it should, "
                "look at the compiler it runs.")
    suspects = tuple(a.pid for a in active)
    return Verdict(VerdictKind.COMPILING, Severity.WARNING, summary, suspects,
                   _lines(facts, suspects))


def _abandoned_build(facts: Facts, active: tuple[CompileActivity, ...]) -> Verdict | None:
    """Every compile waits, off CPU and stuck, for another process's build lock, and nothing
    of the job builds (no compiler, no busy compile worker): the lock's builder is gone, a
    build killed halfway (an OOM kill, a cancelled job) left its lock file, and torch's
    FileBaton polls for that file to vanish forever (pytorch#189245). Not a compile: a hang."""
    if not all(a.build_lock and not a.compilers and not a.busy_workers for a in active):
        return None
    if not all(k in facts.stuck for a in active
               for k in unique_keys(facts.processes, a.pid)):
        return None
    procs = [p for a in active for p in facts.processes if p.pid == a.pid]
    lock = active[0].build_lock
    sites = sorted({a.site for a in active if a.site})
    where = f" at {', '.join(sites)}" if sites else ""
    verb = "waits" if len(procs) == 1 else "wait"
    summary = (f"A build nobody runs: {who_many(procs)} {verb} for {lock}{where}, polling "
               "for it to go, and no process of the job builds "
               "(no compiler runs, no thread is on a CPU). A build killed halfway (an OOM kill, "
               "a cancelled or restarted job) leaves its lock file behind, and the waiters poll "
               "for it forever. Delete that lock file (or the extension's build directory) and "
               "restart; if another job on this machine builds the same extension now, wait "
               "for it instead.")
    suspects = tuple(a.pid for a in active)
    return Verdict(VerdictKind.LOCK_WAIT, Severity.CRITICAL, summary, suspects,
                   _lines(facts, suspects))


FUNCTIONS = frozenset({p2p_deadlock, p2p_points_at, lock_wait, compiling})
