"""The straggler that works: the others wait for a rank that is busy and moving (slow, not hung).

One row of the table in analyze/rules/, right before *straggler*: the same two sides (ranks that
wait in a collective, ranks busy elsewhere), but every busy rank's window shows work
(analyze/evidence/working.py): its calls come and go, it reads or writes data, its GPU computes.
Then
nothing is hung: the waiting ranks will go on when it arrives (rank 0 preparing a dataset
behind ``main_process_first``). A busy rank that spins in one loop keeps the straggler verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangscope.analyze.evidence.facts import BUSY, GONE, WAITING, Facts
from hangscope.analyze.evidence.identity import group_labels
from hangscope.analyze.evidence.progress import IDLE, PAUSED
from hangscope.analyze.evidence.progress import WAITING as WAITING_DECISION
from hangscope.analyze.evidence.working import chain_to_work, starting_workers, work_words
from hangscope.analyze.patterns.calm.calm import fetching_loaders
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.frameworks import polled_why, program_of
from hangscope.model import Group, Process, Severity, Verdict, VerdictKind
from hangscope.words import describe, rank_set, short_who, who


@dataclass(frozen=True)
class Sides:
    """A straggler's two sides: who is busy, and the groups of each side."""

    busy: tuple[Process, ...]
    busy_groups: tuple[Group, ...]
    wait_groups: tuple[Group, ...]


def straggler_sides(facts: Facts) -> Sides | None:
    """Some ranks work (CPU, JIT, I/O) while the others wait for them in a collective; not
    where every process waits for nobody in the job (calm.py: the ranks in a broadcast wait
    for the next request of a driver idle in its server loop), which the calm rule says."""
    progress = facts.snapshot.progress
    if progress is not None and progress.decision in (IDLE, PAUSED):
        return None
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
    proofs = [(p, proof) for p in sides.busy if (proof := _works(facts, p)) is not None]
    if len(proofs) < len(sides.busy):
        return None
    works = "; ".join(f"{describe(g, facts.is_rank)}" for g in sides.busy_groups)
    why = "; ".join(words if len(proofs) == 1 else f"{short_who(p)}: {words}"
                    for p, (words, _) in proofs)
    seconds = facts.snapshot.progress.seconds if facts.snapshot.progress is not None else 0.0
    waits = "; ".join(describe(g, facts.is_rank) for g in sides.wait_groups)
    # a rank that waits on the work ("it waits for X, which works") is not said to work
    joint = "; over" if any(through for _, (_, through) in proofs) else ", and works: over"
    summary = (f"Slow, not hung: {works}{joint} {seconds:.1f} s, {why}. "
               + waits[:1].upper() + waits[1:]
               + " for it, as they should: they go on when it arrives. If this takes longer "
               "than the collective timeout, raise it (init_process_group(timeout=...)) or do "
               "the work before the job starts.")
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary,
                   tuple(p.pid for p in sides.busy), evidence(facts),
                   tuple(p.host for p in sides.busy))


def _works(facts: Facts, proc: Process) -> tuple[str, bool] | None:
    """What shows that ``proc`` works, or that what it waits for does (then True): a rank
    that waits on its own DataLoader worker (or any process, through the wait-for graph) that
    the window saw work is that work's slow side, not blocked (blind round 22's 06: Lightning
    rank 1's worker computing each batch for seconds while rank 0 waits in the step's
    all_reduce)."""
    words = work_words(facts.snapshot, proc, facts.progress.get(proc.key))
    if words is not None:
        return words, False
    chain = chain_to_work(facts.snapshot, proc.pid)
    end = facts.snapshot.process(chain[-1]) if chain else None
    works = work_words(facts.snapshot, end, facts.progress.get(end.key)) if end else None
    return (f"it waits for {who(end)}, which works: {works}", True) if end and works else None


def loader_bound(facts: Facts) -> Verdict | None:
    """Every subject waits for DataLoader workers that fetch slowly (asleep and woken again
    and again in the dataset): the input pipeline is slow, nothing is hung."""
    fetching = fetching_loaders(facts.snapshot)
    if not fetching or not facts.subjects:
        return None
    # A subject whose stack moved between samples went on (a rank past its batch, now in the
    # step's all_reduce): only the others must wait for the loaders.
    waiting = [p for p in facts.subjects if (m := facts.progress.get(p.key)) is not None
               and m.decision == WAITING_DECISION]
    if not waiting or any(p not in waiting and p.key in facts.stuck for p in facts.subjects):
        return None
    loaders = [p for p in facts.processes if p.pid in fetching]
    sites = sorted({t.site for p in loaders if (t := p.working_thread) and t.site})
    at = f" at {', '.join(sites)}" if sites else ""
    seconds = facts.snapshot.progress.seconds if facts.snapshot.progress is not None else 0.0
    summary = (f"Slow, not hung: {', '.join(short_who(p) for p in waiting)} "
               f"{'waits' if len(waiting) == 1 else 'wait'} for the next batch from "
               f"{len(loaders)} DataLoader worker{'s' if len(loaders) > 1 else ''} "
               f"({', '.join(str(p.pid) for p in loaders)}), which fetch slowly{at}: asleep "
               f"and woken again and again over {seconds:.1f} s, no batch written yet. The "
               "input pipeline is the bottleneck (more workers, prefetch, a faster source); "
               "dump again with a longer --window to see a batch arrive.")
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary, (), evidence(facts))



def waits_on_work(facts: Facts) -> Verdict | None:
    """Every subject that does not move waits, through the wait-for graph, on a process the
    window saw progress (a Ray driver in ``ray.get`` on an actor that computes, or through an
    actor that waits on another): the work is being done elsewhere, slow at worst."""
    stuck = [p for p in facts.subjects if p.key in facts.stuck]
    if not stuck:
        return None
    chains = []
    for proc in stuck:
        chain = chain_to_work(facts.snapshot, proc.pid)
        if chain is None:
            return None
        chains.append(chain)
    procs = {p.pid: p for p in facts.processes}
    seconds = facts.snapshot.progress.seconds if facts.snapshot.progress is not None else 0.0
    parts = []
    for proc, chain in zip(stuck, chains, strict=True):
        end = procs.get(chain[-1])
        works = work_words(facts.snapshot, end, facts.progress.get(end.key)) if end else None
        through = (" through " + ", ".join(who(procs[pid]) for pid in chain[1:-1] if pid in procs)
                   if len(chain) > 2 else "")
        site = proc.working_thread.site if proc.working_thread is not None else None
        parts.append(f"{who(proc)} waits{f' at {site}' if site else ''} for "
                     f"{who(end) if end else f'PID {chain[-1]}'}{through}"
                     + (f", which works: {works}" if works else ", which progresses"))
    summary = (f"Progressing over {seconds:.1f} s: " + "; ".join(parts)
               + ". Its waits end as the work they wait for is done: slow at worst, not hung.")
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary, (), evidence(facts))


def workers_starting(facts: Facts) -> Verdict | None:
    """Every subject waits, none moved, and the job's framework started a worker during the
    dump that computes in its start-up (``ProgressEvidence.newcomers``: Ray's raylet starting
    the worker of the actor a driver's pipeline waits on, born after discovery listed the job,
    so unsampled): what the subjects wait for is being set up, slow at worst."""
    if not facts.stuck or any(p.key not in facts.stuck for p in facts.subjects):
        return None
    born = starting_workers(facts.snapshot)
    if not born:
        return None
    procs = {p.pid: p for p in facts.processes}
    named = "; ".join(
        f"PID {n.pid} ({_describe_title(n.title)}), started by "
        f"{who(procs[n.ppid]) if n.ppid in procs else f'PID {n.ppid}'} "
        f"{max(0.0, n.born_s):.1f} s into this dump, used {n.cpu_s:.1f} s of CPU since"
        for n in born[:3])
    stuck = [p for p in facts.subjects if p.key in facts.stuck]
    first = stuck[0].working_thread
    site = f" at {first.site}" if first is not None and first.site else ""
    names = who(stuck[0]) if len(stuck) == 1 else group_labels(
        facts.snapshot, tuple(p.pid for p in stuck))
    summary = (f"Starting up, not hung: {names} "
               f"{'waits' if len(stuck) == 1 else 'wait'}{site} while the framework starts "
               f"the workers the work runs in: {named}. A worker born during the dump is not "
               "sampled: dump again once it runs (its start-up imports its libraries).")
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary, (), evidence(facts))


def _describe_title(title: str) -> str:
    """A newcomer's program, short: its script's name (``default_worker.py``)."""
    words = program_of(title).split()
    script = next((w for w in words[1:] if w.endswith(".py")), words[0] if words else "")
    return script.rsplit("/", 1)[-1] or "a process"


def awaits_turn(facts: Facts) -> Verdict | None:
    """Every subject that does not move waits in a framework's own wait that another of its
    processes ends on a schedule (frameworks/: ``polled_waits``; Ray Train's workers in
    ``report`` until the controller's next poll takes their result): paced, not hung; the
    framework's words say by what, and what to change."""
    stuck = [p for p in facts.subjects if p.key in facts.stuck]
    whys = [_turn(p) for p in stuck]
    if not stuck or None in whys:
        return None
    seconds = facts.snapshot.progress.seconds if facts.snapshot.progress is not None else 0.0
    first = stuck[0].working_thread
    site = f" at {first.site}" if first is not None and first.site else ""
    numbered = [p.rank.global_rank for p in stuck if p.rank is not None
                and p.rank.global_rank is not None]
    names = (rank_set(numbered, True) if len(numbered) == len(stuck)
             else group_labels(facts.snapshot, tuple(p.pid for p in stuck)))
    summary = (f"Slow, not hung: {names} {'waits' if len(stuck) == 1 else 'wait'}"
               f"{site}, no line moved over {seconds:.1f} s. {whys[0]}")
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary, (), evidence(facts))


def _turn(proc: Process) -> str | None:
    """What the process's working thread waits for, where that is a framework's polled wait."""
    thread = proc.working_thread
    if thread is None:
        return None
    return next((why for f in thread.frames if not f.native
                 and (why := polled_why(f.name, f.file))), None)
