"""The verdict rules: an ordered table over one facts record; the first rule that holds wins.

Each rule is a small function ``(Facts) -> Verdict | None`` and one row of :data:`RULES`.
The order is the diagnosis (docs/architecture.md, "Verdicts"): a more specific story beats a
more general one. To add a rule: write the function here, add its row where it belongs, and
add a GIVEN-a-real-snapshot test in tests/unit/test_verdict_rules.py.

Why one file: the table is the diagnosis's order, and its rows read against their small
functions side by side (rules of their own kind live in rules_*.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import is_

from hangscope.analyze.evidence.facts import BUSY, GONE, Facts, all_working, computes_unsampled
from hangscope.analyze.evidence.group import group_ranks
from hangscope.analyze.evidence.identity import comparable_groups, coordinates_label, replica_key
from hangscope.analyze.evidence.progress import STUCK
from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.analyze.evidence.world import describe_missing, waits_for_nodes
from hangscope.analyze.patterns.ends.stoppedends import traced_words
from hangscope.analyze.rules.accept import fd_exhausted, unaccepted_connections
from hangscope.analyze.rules.blocked import exiting_note, straggler_head
from hangscope.analyze.rules.calm import all_stopped, calm, held_stopped
from hangscope.analyze.rules.collectives import (
    collective_behind,
    collective_mismatch,
    collective_missing,
)
from hangscope.analyze.rules.elsewhere import skipped_collective
from hangscope.analyze.rules.exiting import cannot_exit, ended, job_finished
from hangscope.analyze.rules.failed import rank_failed
from hangscope.analyze.rules.graph import (
    crash_looping,
    held_across_wait,
    held_verdict,
    lock_holder,
    lock_ring,
    thread_died,
    thread_sites,
    wait_cycle,
    wait_shape,
    wait_sink,
    waiting_for,
)
from hangscope.analyze.rules.lostput import lost_put
from hangscope.analyze.rules.ownerless import ownerless_lock
from hangscope.analyze.rules.p2p_unmatched import p2p_unmatched
from hangscope.analyze.rules.paused import paused_engine
from hangscope.analyze.rules.rendezvous import mismatched_roots, split_rendezvous
from hangscope.analyze.rules.slow import (
    awaits_turn,
    loader_bound,
    straggler_sides,
    waits_on_work,
    workers_starting,
    working_straggler,
)
from hangscope.analyze.rules.startup import shutdown_pending, startup_pending
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.analyze.rules.tiebreak import break_tie
from hangscope.analyze.rules.waits import (
    compiling,
    lock_wait,
    p2p_deadlock,
    p2p_points_at,
    recv_any_source,
)
from hangscope.analyze.rules.warned import framework_warned
from hangscope.frameworks.torch_distributed import in_fsdp
from hangscope.model import (
    Category,
    Group,
    Process,
    Role,
    Severity,
    Thread,
    Verdict,
    VerdictKind,
    in_library,
    rank_id,
)
from hangscope.words import describe, group_names, program, rank_set, verb, who

RuleFunction = Callable[[Facts], "Verdict | None"]


@dataclass(frozen=True)
class Rule:
    """One row of the verdict table."""

    kind: VerdictKind
    holds: RuleFunction
    when: str  # one line for docs and ``--explain``: when the rule holds


#: Why a rank moved, short, by the evidence that decided it.
_MOVED_BY = {"python": "its Python line moved", "gpu": "its GPU's kernels do work",
             "counters": "its waits complete and data moves",
             "source": "it computes on a core through a for loop's items",
             "sleep": "its sleeps end, each the next call's or item's",
             "socket": "its event loop moves socket data",
             "tcp": "its TCP connections move data"}
#: The same, said of several ranks at once.
_MOVED_BY_MANY = {"python": "their Python lines moved", "gpu": "their GPUs' kernels do work",
                  "counters": "their waits complete and data moves",
                  "source": "they compute on a core through a for loop's items",
                  "sleep": "their sleeps end, each the next call's or item's",
                  "socket": "their event loops move socket data",
                  "tcp": "their TCP connections move data"}


def _moved_words(facts: Facts, moving: list[Process]) -> str:  # _MOVED_BY: why, by evidence
    """``rank 0: its Python line moved; ranks 1-3: its waits complete ...`` (measured or not)."""
    by_why: dict[str, list[int]] = {}
    for proc in moving:
        measured = facts.progress.get(proc.key)
        why = (_MOVED_BY.get(measured.evidence, "") if measured is not None
               and measured.decision == "progressing" else "") or (
            f"{program(proc)} computes ({proc.cpu_percent or 0:.0f}% of a CPU; no Python "
            "stack to compare)" if computes_unsampled(proc) else "changed stack between samples")
        by_why.setdefault(why, []).append(rank_id(proc))
    many = {why: _MOVED_BY_MANY[key] for key, why in _MOVED_BY.items()}
    return "; ".join(f"{rank_set(ranks, facts.is_rank)}: "
                     f"{many.get(why, why) if len(ranks) > 1 else why}"
                     for why, ranks in by_why.items())


def _slow_words(facts: Facts) -> str:
    """`` Slow, not proven hung: ...`` where the measured evidence could not decide."""
    if not facts.slow:
        return ""
    first = facts.progress[facts.slow[0].key]
    return (f" Slow, not proven hung: {rank_set([rank_id(p) for p in facts.slow], facts.is_rank)}"
            f" ({first.reason}).")


def no_target(facts: Facts) -> Verdict | None:
    if facts.subjects:
        return None
    return Verdict(VerdictKind.NO_TARGET, Severity.WARNING, "No process of the job could be read.")


def mismatched_collectives(facts: Facts) -> Verdict | None:
    """Stuck ranks wait in different collectives or call sites; the smaller side is suspect."""
    # Point-to-point waits are not group-wide: a send and a recv are a pair, never a mismatch
    # (rules_waits.py reads their peers). Ranks compare only within one replica / PP stage.
    # One pass over the subjects (131,072 ranks), each op's p2p test once; none where every
    # group of them waits in a group-wide collective (``_all_in_collectives``).
    if _held_in_a_cycle(facts):
        return None  # each rank's other thread holds what the other's needs: a deadlock
    coll = _all_in_collectives(facts)
    if coll is None:
        coll = _in_collectives(facts)
    for members in comparable_groups(coll):
        # Name the replica / stage: rank 1 of DP0 and rank 1 of DP1 are two processes.
        replica = coordinates_label(dict(replica_key(members[0])))
        # Every subject, in order (all ranks in collectives): the groups facts made already.
        same = len(members) == len(facts.subjects) and all(map(is_, members, facts.subjects))
        verdict = _mismatch(facts, facts.groups if same else group_ranks(members),
                            f" (in {replica})" if replica else "", members)
        if verdict is not None:
            return verdict
    return None


def _held_in_a_cycle(facts: Facts) -> bool:
    """The ranks' different collectives are two threads' calls, each held up by a lock (or
    another wait) of its peer's other thread: a cycle of the wait graph through a collective
    and a wait that is none (a snapshot thread holding a lock in its own group's all_gather
    while the other rank's main thread holds its lock in all_reduce)."""
    graph = facts.snapshot.wait_graph
    return graph is not None and any(
        p.kind == "cycle" and {graph.edges[i].kind == "collective" for i in p.edges} == {
            True, False} for p in graph.patterns)


def _all_in_collectives(facts: Facts) -> list[Process] | None:
    """Every subject, where none moves and each group of them waits in a group-wide
    collective: what ``_in_collectives`` keeps then, told once per group, not per rank (a
    group's category and op are each member's: ``group_ranks`` groups by them). None: ask
    each rank."""
    groups, subjects = facts.groups, facts.subjects
    if facts.moving or len(facts.categories) != len(subjects) or sum(
            len(g.pids) for g in groups) != len(subjects):  # (no PID twice; groups of them)
        return None
    if all(g.category is Category.COLLECTIVE and not is_p2p(g.op) for g in groups):
        return list(subjects)
    return None


def _in_collectives(facts: Facts) -> list[Process]:
    """The stuck subjects in a group-wide collective, in order; then those creating a group
    (new_group), where any is."""
    coll: list[Process] = []
    new_group: list[Process] = []
    moving, categories = facts.moving, facts.categories
    p2p: dict[str | None, bool] = {}
    for p in facts.subjects:
        key = p.key
        if key in moving or (w := p.working_thread) is None:
            continue
        category = categories[key]
        if category is Category.COLLECTIVE:
            op = w.op
            point = p2p.get(op)
            if point is None:
                point = p2p[op] = is_p2p(op)
            if not point:
                coll.append(p)
        elif category is Category.COMM_INIT and w.op == "new_group":
            new_group.append(p)
    if coll:  # new_group is a collective of the default group: its callers wait for the rest
        coll += new_group
    return coll


_NEW_GROUP = (" new_group is a collective of the whole default group: every rank must call "
              "every new_group, in the same order, even ranks outside the new group; one "
              "called under a rank condition (here or earlier) leaves the ranks creating "
              "different groups.")


_FSDP_UNITS = (" Every rank waits in FSDP's own collectives: the ranks ran different FSDP units "
               "(a fully_shard-ed module that some ranks skip on a data-dependent branch, or "
               "a different number of forward passes), so their all_gathers and "
               "reduce_scatters no longer pair. Run every fully_shard-ed module on every rank "
               "each step (a dummy input where there is none), and give every rank the same "
               "number of forward passes.")


def _mismatch(facts: Facts, coll_groups: tuple[Group, ...], replica: str,
              members: Sequence[Process] = ()) -> Verdict | None:
    """The mismatch among the collective groups of one comparable set of ranks."""
    if len(coll_groups) <= 1:
        return None
    is_rank = facts.is_rank
    ordered = sorted(coll_groups, key=lambda g: (-len(g.ranks), g.ranks))
    largest = len(ordered[0].ranks)
    tie = sum(1 for g in ordered if len(g.ranks) == largest) > 1
    suspects_groups = ordered if tie else [g for g in ordered if len(g.ranks) < largest]
    summary = f"Mismatched collectives{replica}: " + "; ".join(
        describe(g, is_rank) for g in ordered)
    broken = break_tie(facts, members, [g for g in ordered if len(g.ranks) == largest]) \
        if tie and members else None
    if broken is not None:  # the other replicas' path says which side is the usual one
        tie = False
        suspects_groups = [g for g in ordered if g is not broken[0]]
        summary += f". {broken[1]}"
    if tie:
        summary += ". The groups are the same size: no majority says which side is wrong." + (
            _FSDP_UNITS if all(all_working(facts.snapshot, g.pids, in_fsdp) for g in ordered)
            else "")
    else:
        odd = [r for g in suspects_groups for r in g.ranks]
        labels = [label for g in suspects_groups for label in g.labels]
        summary += (f". The odd one out is "
                    f"{', '.join(labels) if labels else rank_set(odd, is_rank)}.")
    if any(g.op == "new_group" for g in coll_groups):
        summary += _NEW_GROUP
    chosen = frozenset().union(*(g.keys for g in coll_groups))
    others = [g for g in facts.groups if chosen.isdisjoint(g.keys)]
    lines = tuple(f"{g.signature}: {group_names(g, is_rank)}" for g in ordered + others)
    return Verdict(VerdictKind.MISMATCHED_COLLECTIVES, Severity.CRITICAL, summary,
                   tuple(pid for g in suspects_groups for pid in g.pids), lines,
                   tuple(h for g in suspects_groups for h in g.hosts))


def missing_rank(facts: Facts) -> Verdict | None:
    """Fewer ranks than the launcher asked for, or a rank exited, is a zombie, or is stopped."""
    job, missing = facts.job, facts.missing
    short = job.expected_ranks is not None and facts.ranks_found < job.expected_ranks
    if not short and not facts.gone and missing is None:
        return None
    if job_finished(facts):
        return None  # exited with code 0, or reaped once the job's code ran to its end
    if not facts.has_ranks and len(facts.gone) < len(facts.subjects):
        # An exited child of a job without ranks, while the rest of it waits: the wait-for
        # graph tells why (a job whose every process exited has nothing else to say).
        return None
    is_rank = facts.is_rank
    parts = []
    # no rank yet, the launcher in torchrun's rendezvous: it waits for the other nodes
    nodes = waits_for_nodes(job, facts.processes) if not facts.ranks_found else None
    if missing is not None:  # which ranks, by what source, and what is left of them
        parts.append(describe_missing(missing, unstarted=nodes is not None))
    elif short:
        parts.append(f"expected {job.expected_ranks} ranks ({job.expected_source}), "
                     f"found {facts.ranks_found}")
    exited = {pid for pid, _ in missing.exited} if missing is not None else set()
    # (host, PID) of the zombies world.py named: an exited rank's PID may be live elsewhere.
    said = [p.key for p in facts.processes if p.is_zombie and p.pid in exited]
    for proc in facts.gone:
        if proc.key in said:
            continue  # describe_missing named it with its exit code
        last = _last_log_line(facts, proc)
        doing = traced_words(facts.snapshot, proc) or verb(facts.categories[proc.key])
        if is_rank and (proc.rank is None or proc.rank.key is None):
            # a rank by its title alone (a vLLM Worker): its PID, not a rank number
            parts.append(f"PID {proc.pid} ({program(proc)}) {doing}{last}")
            continue
        name = rank_set([rank_id(proc)], is_rank)  # without ranks it is "PID N": once
        parts.append(f"{name}{f' (PID {proc.pid})' if is_rank else ''} {doing}{last}")
    if nodes is not None:
        parts.append(nodes[1])
    rest = [g for g in facts.groups if g.category not in GONE
            and (nodes is None or nodes[0].pid not in g.pids)]
    if rest:
        parts.append("; ".join(describe(g, is_rank) for g in rest))
    # A zombie rank has no environment left to read: its role is "other", not a subject.
    # The suspects are the gone ranks, or none: a launcher idling in its serve loop is no cause.
    keys = tuple(dict.fromkeys((*said, *(p.key for p in facts.gone))))
    # A rank held in a ptrace stop: its tracer, where it is one of the job's, is a suspect too.
    tracers = {p.tracer for p in facts.gone if p.state == "t" and p.tracer is not None}
    keys += tuple(p.key for p in facts.processes if p.pid in tracers and p.key not in keys)
    return Verdict(VerdictKind.MISSING_RANK, Severity.CRITICAL,
                   "Missing rank: " + "; ".join(parts) + ".", tuple(pid for _, pid in keys),
                   (*evidence(facts), *_coordinators_waiting(facts)),
                   tuple(host for host, _ in keys))


def _last_log_line(facts: Facts, proc: Process) -> str:
    """`` (its last log line: ...)`` only from a log of its own: the last line of a file other
    processes write too (the job's shared log, in the findings) may be anyone's."""
    if not proc.log_tail or any(p.pid != proc.pid and not set(p.log_files).isdisjoint(
            proc.log_files) for p in facts.processes):
        return ""
    return f" (its last log line: {proc.log_tail[-1].strip()})"


def _coordinators_waiting(facts: Facts) -> tuple[str, ...]:
    """What an engine core or controller's main thread waits on: who is left waiting for the
    missing rank (``VLLM::EngineCore`` in recv on its workers' pipes), as evidence."""
    lines = []
    for proc in facts.processes:
        if proc.role not in (Role.ENGINE_CORE, Role.CONTROLLER):
            continue
        main = next((t for t in proc.threads if t.tid == proc.pid and t.python), None)
        if main is not None and main.category not in BUSY and main.category not in GONE:
            lines.append(f"{who(proc)}, which drives the ranks: its main thread "
                         f"{verb(main.category)}" + (f" at {main.site}" if main.site else ""))
    return tuple(lines)


def straggler(facts: Facts) -> Verdict | None:
    """Some ranks work (CPU, JIT, I/O) while the others wait for them in a collective."""
    sides = straggler_sides(facts)
    if sides is None:
        return None
    busy = list(sides.busy)
    # A rank that works is a straggler; one blocked on a lock, a pipe or at exit is not.
    summary = (straggler_head(facts, busy)
               + "; ".join(describe(g, facts.is_rank) for g in sides.busy_groups)
               + exiting_note(busy)
               + ", while " + "; ".join(describe(g, facts.is_rank) for g in sides.wait_groups)
               + " for it.")
    return Verdict(VerdictKind.STRAGGLER, Severity.CRITICAL, summary,
                   tuple(p.pid for p in busy), evidence(facts), tuple(p.host for p in busy))


def lock_threads(proc: Process) -> list[Thread]:
    """Threads blocked acquiring a lock (not joining another thread or idling).

    Only threads with a Python stack count: every CUDA/torch process has a dozen native-only
    threads parked in futex_do_wait (the driver's and the intra-op pool's), which are no
    evidence of a deadlock (the H200 captures in tests/fixtures/gpu/*.proc.txt).
    """
    out = []
    for thread in proc.threads:
        if thread.helper or not thread.python or thread.category is not Category.LOCK:
            continue
        names = {f.name.rsplit(".", 1)[-1] for f in thread.frames[:6] if not f.native}
        if names & {"join", "_wait_for_tstate_lock"}:
            continue
        leaf = next((f for f in thread.frames if not f.native), None)
        if leaf is None:
            continue  # no Python frame: a native pool's worker idle in its condition wait
        if leaf.file and leaf.file.endswith(("threading.py", "queue.py")) \
                and leaf.name.rsplit(".", 1)[-1] in ("wait", "get", "wait_for"):
            continue  # waiting to be notified (Event, Condition, Queue): idle, not a lock cycle
        if in_library(leaf.file) and _native_only_lock(thread):
            continue  # a C extension's own lock inside a library call (gRPC's blocking call)
        out.append(thread)
    return out


#: Python's own lock acquires in a native stack (a ``threading.Lock``/``RLock`` taken), as
#: parts of a frame's name (``lock_PyThread_acquire_lock``).
_PY_LOCK = ("PyThread_acquire_lock", "rlock_acquire", "lock_acquire", "_PyMutex_Lock",
            "_PySemaphore_Wait")


def _native_only_lock(thread: Thread) -> bool:
    """The thread's native stack was read and holds no Python lock acquire: the futex it
    waits on is a C extension's own (a library's condition variable), no Python lock that a
    lock-order inversion could be made of."""
    native = [f.name for f in thread.frames if f.native]
    return bool(native) and not any(part in n for n in native for part in _PY_LOCK)


def lock_across_wait(facts: Facts) -> Verdict | None:
    """Threads wait for a Python lock whose holder waits to be notified inside the block that
    holds it (an Event, a Condition): stated before the chain that would end at the holder."""
    graph = facts.snapshot.wait_graph
    holders = {e.pid for e in graph.edges if e.kind == "py_lock"} if graph else set()
    for proc in facts.processes:
        if proc.pid not in holders:
            continue
        held = held_across_wait(facts, proc, lock_threads(proc))
        if held is not None:
            return held_verdict(facts, proc, held)
    return None


def local_deadlock(facts: Facts) -> Verdict | None:
    """Two or more threads of one process stuck acquiring locks."""
    graph = facts.snapshot.wait_graph
    # A process whose threads close a lock cycle is a subject of it, the launcher included.
    rings = {p.suspect for p in graph.patterns if p.kind == "lock_ring"} if graph else set()
    for proc in (*facts.subjects, *(p for p in facts.processes
                                    if p.pid in rings and p not in facts.subjects)):
        locked = lock_threads(proc)
        ring = lock_ring(facts, proc.pid)
        cycle = ring is not None and all(t.stuck or facts.samples <= 1 for t in proc.threads
                                         if t.tid in {tid for tid, *_ in ring[0]})
        if not cycle and (len(locked) < 2 or proc.key not in facts.stuck or not all(
                t.stuck or facts.samples <= 1 for t in locked)):
            continue
        behind = ""
        if ring is not None and cycle:
            # The source names the cycle: the threads in it, what each holds and takes; the
            # others queue behind them (victims, not holders).
            by_tid = {t.tid: t for t in proc.threads}
            locked = [by_tid[tid] for tid, *_ in ring[0] if tid in by_tid]
            names = ", ".join(f"{by_tid[tid].name if tid in by_tid else tid} at {site}, "
                              f"holding {holds} and taking {wants}"
                              for tid, holds, wants, site in ring[0])
            if ring[1]:
                behind = (f"; {ring[1]} more thread{'s wait' if ring[1] > 1 else ' waits'} "
                          "behind them")
        else:
            names = thread_sites(locked)
        # A rank is named as a rank; the ranks that wait for it are the deadlock's effect.
        where = who(proc) if proc.role is Role.RANK and proc.is_rank_numbered \
            else f"PID {proc.pid}"
        # (one holder waiting on an Event inside its block: lock_across_wait, a row before)
        summary = (f"Local deadlock in {where}: {len(locked)} threads wait on locks "
                   f"that the others hold ({names}){behind}{waiting_for(facts, proc)}"
                   + ". A lock-order inversion: make every thread take the locks in the same "
                   "order.")
        lines = tuple(f"thread {t.name or t.tid} (tid {t.tid}): {t.category} at {t.site}, "
                      f"wchan {t.wchan or '?'}" for t in locked)
        return Verdict(VerdictKind.LOCAL_DEADLOCK, Severity.CRITICAL, summary, (proc.pid,),
                       lines, (proc.host,))
    return None


_ADVICE = {
    # The same call, not proven the same collective: a line that takes its process group or
    # tensor from a variable (buckets over two groups in a data-dependent order) looks the
    # same on every rank in stacks, and only the Flight Recorder records group and size.
    Category.COLLECTIVE: " Every rank waits at the same collective call: either the block is "
    "below Python (look at the GPU: a spinning kernel; the network; a rank on another node), "
    "or the ranks passed that call different process groups or sizes, chosen at run time, "
    "which stacks cannot show (the Flight Recorder records both: TORCH_FR_BUFFER_SIZE=2000 at "
    "launch).",
    Category.COMM_INIT: " A peer never joined the rendezvous: check the other nodes, "
    "MASTER_ADDR/MASTER_PORT and the network.",
    Category.IPC_WAIT: " They wait on another process: look at the one that should send (the "
    "launcher, the engine, a dead worker).",
    Category.CUDA_SYNC: " The GPU does not finish its work: look at GPU utilisation and at the "
    "kernel queued before the sync.",
}


def _advice(facts: Facts, group: Group) -> str:
    """The category's advice; a CUDA sync's only when its GPU spins or idles (or is unread)."""
    advice = _ADVICE.get(group.category, "")
    if is_p2p(group.op):  # one peer, not the whole group: "every rank arrived" would be wrong
        advice = (" They wait in point-to-point ops: each for one peer that has not sent or "
                  "received its side (py-spy dump --locals shows src/dst).")
    gpus = [m for key in group.keys if (m := facts.progress.get(key)) is not None and m.gpu]
    if group.category is Category.CUDA_SYNC and gpus and not any(
            m.gpu_state in ("spin", "idle") for m in gpus):
        advice = ""  # the GPU works or is merely busy: "it does not finish" would be a guess
    return advice + (f" {gpus[0].gpu}." if gpus else "")


def all_waiting(facts: Facts) -> Verdict | None:
    """Every rank shares one signature and is stuck there (with advice per category)."""
    if len(facts.groups) != 1 or not facts.stuck:
        return None
    group = facts.groups[0]
    summary = (f"All waiting: {describe(group, facts.is_rank)}.{_advice(facts, group)}"
               f"{_slow_words(facts)}")
    return Verdict(VerdictKind.ALL_WAITING, Severity.WARNING, summary, (), evidence(facts))


def progressing(facts: Facts) -> Verdict | None:
    """Stacks moved between samples: slow, not hung."""
    moving = [p for p in facts.subjects if p.key in facts.moving]
    if not moving:
        return None
    if facts.progress and facts.snapshot.progress is not None:  # measured: say by what
        summary = (f"Progressing over {facts.snapshot.progress.seconds:.1f} s: "
                   f"{_moved_words(facts, moving)}. Slow at worst, not hung.")
    else:
        summary = (f"Progressing: {rank_set([rank_id(p) for p in moving], facts.is_rank)} "
                   "changed stack between samples: slow rather than hung.")
    if len(moving) < len(facts.subjects):
        still = [rank_id(p) for p in facts.subjects if p.key not in facts.moving]
        summary += f" {rank_set(still, facts.is_rank)} did not move."
    return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary, (), evidence(facts))


def unknown(facts: Facts) -> Verdict:
    """Nothing above holds: describe the groups, and name a thread that spin-waits (it
    burns a core for a change only another thread or process can make: where to look)."""
    summary = ("Blocked: " + "; ".join(describe(g, facts.is_rank) for g in facts.groups) + "."
               + _slow_words(facts))
    spinning = [(p, m) for p in facts.subjects if (m := facts.progress.get(p.key)) is not None
                and m.decision == STUCK and m.spins]
    if spinning:
        summary += " " + " ".join(
            f"{who(p)} is {m.reason[:1].lower()}{m.reason[1:]}: find what it waits for, and "
            "why nothing sets it." for p, m in spinning)
    return Verdict(VerdictKind.UNKNOWN, Severity.WARNING, summary,
                   tuple(p.pid for p, _ in spinning), evidence(facts),
                   tuple(p.host for p, _ in spinning) if spinning else ())


#: The verdict table, tried in order; :func:`unknown` answers when no row holds.
RULES: tuple[Rule, ...] = (
    Rule(VerdictKind.NO_TARGET, no_target, "no process of the job could be read"),
    # Before every rule that reads a stopped process as the cause: all of them stopped at
    # once is a pause (a suspended Slurm job), not a missing rank.
    Rule(VerdictKind.PAUSED, all_stopped,
         "every live process of the job is stopped (SIGSTOP): the job was suspended"),
    # A rank's own error (NCCL/c10d in its output) says why before any stack can.
    Rule(VerdictKind.RANK_FAILED, rank_failed,
         "a rank's output says its NCCL/c10d collective failed (the error leads)"),
    # Collective evidence (NCCL RAS, Flight Recorder) before the stacks' rule of each kind:
    # an NCCL host waits at its next sync or launch, not in the collective it is stuck on.
    Rule(VerdictKind.MISMATCHED_COLLECTIVES, collective_mismatch,
         "NCCL RAS or the Flight Recorder: ranks issued different collectives"),
    Rule(VerdictKind.MISMATCHED_COLLECTIVES, mismatched_collectives,
         "stuck ranks wait in different collective ops or call sites"),
    Rule(VerdictKind.WAIT_CHAIN, crash_looping,
         "children of one process die as they start, one error repeated, and are restarted"),
    # Before the missing ranks: a rank that finished is not missing, and the one that cannot
    # finish is the story.
    Rule(VerdictKind.WAIT_CHAIN, cannot_exit,
         "every rank finished but one whose exit joins a thread or child that never ends"),
    Rule(VerdictKind.PROGRESSING, ended,
         "every subject exited during the dump (or with code 0), none with an error"),
    # Before the missing ranks: ranks that went to another store are not missing.
    Rule(VerdictKind.MISMATCHED_COLLECTIVES, split_rendezvous,
         "ranks in the rendezvous look for the job's store at different addresses (--locals)"),
    Rule(VerdictKind.MISMATCHED_COLLECTIVES, mismatched_roots,
         "ranks in one broadcast, scatter or gather name different roots (--locals)"),
    Rule(VerdictKind.MISSING_RANK, collective_missing,
         "NCCL RAS has no data from a rank, or a Flight Recorder group member has no process"),
    Rule(VerdictKind.MISSING_RANK, missing_rank,
         "fewer ranks than expected, or a rank exited, is a zombie or is stopped"),
    Rule(VerdictKind.P2P_DEADLOCK, p2p_deadlock,
         "stuck ranks wait for each other in send/recv around a cycle (py-spy --locals)"),
    Rule(VerdictKind.MISMATCHED_COLLECTIVES, recv_any_source,
         "a rank waits in recv from any source and no other rank sends (py-spy --locals)"),
    # Before the graph: the store waiter's chain ends at the store's owner, which waits in
    # the collective the waiter skipped.
    Rule(VerdictKind.MISMATCHED_COLLECTIVES, skipped_collective,
         "most ranks wait in a collective, the others on the c10d store (a skipped collective)"),
    # The wait-for graph (analyze/patterns/waitpatterns.py): a cycle is a deadlock whatever waits in
    # it; then the shapes with one cause (a blocked loop, a lost result, a prompt); then one
    # thread holding the lock or GIL that the others want, before a lock-order inversion is
    # guessed from the stacks alone.
    # Before the graph and progress: a process out of fds fails whatever it tries (a loop
    # retrying EMFILE moves its lines), and the chains that end at it are its effect.
    Rule(VerdictKind.WAIT_CHAIN, fd_exhausted,
         "a process of the stuck job has no file descriptor left under its RLIMIT_NOFILE"),
    # Before the graph: a chain that ends at loader workers fetching slowly is no hang.
    Rule(VerdictKind.PROGRESSING, loader_bound,
         "every process waits for DataLoader workers that sleep and wake in their dataset"),
    # Before the graph: a framework that says its own parties stall knows which wait of theirs
    # is the story (the graph ends at its coordinator, waiting as designed).
    Rule(VerdictKind.WAIT_CHAIN, framework_warned,
         "a framework's own warning says its parties stall, and no subject moved"),
    Rule(VerdictKind.WAIT_CHAIN, paused_engine,
         "an engine's log says it was paused and not resumed, and clients wait on it"),
    # Before the cycle: the processes idle in their queues' gets read as one.
    Rule(VerdictKind.WAIT_CHAIN, lost_put,
         "a multiprocessing Queue's feeder thread dropped an item (its traceback in the log)"),
    Rule(VerdictKind.DEADLOCK, wait_cycle,
         "the wait-for graph has a cycle, or a forked child waits on a lock it inherited held"),
    Rule(VerdictKind.WAIT_CHAIN, wait_shape,
         "an event loop blocked in a sync call, a Pool result nobody computes, a prompt"),
    Rule(VerdictKind.LOCAL_DEADLOCK, lock_across_wait,
         "threads wait for a lock its holder keeps while it waits on an Event or Condition"),
    Rule(VerdictKind.WAIT_CHAIN, lock_holder,
         "threads wait for a Python lock or the GIL that one thread holds while blocked"),
    Rule(VerdictKind.LOCK_WAIT, ownerless_lock,
         "threads wait for one Python lock that no running thread holds (a suspended "
         "generator, a skipped release)"),
    # Before the straggler rules: a rank whose threads deadlock each other works on nothing.
    Rule(VerdictKind.LOCAL_DEADLOCK, local_deadlock,
         "two or more threads of one process stuck acquiring locks"),
    Rule(VerdictKind.STRAGGLER, collective_behind,
         "NCCL RAS or the Flight Recorder: a rank has not reached a collective the others did"),
    Rule(VerdictKind.LOCK_WAIT, lock_wait,
         "ranks wait for a file lock that another process holds (/proc/locks)"),
    Rule(VerdictKind.COMPILING, compiling,
         "main or a rank compiles (torch.compile, Triton) while the others wait, or alone"),
    # After the file-lock and compile stories it generalises, before the stack-only rules.
    Rule(VerdictKind.WAIT_CHAIN, wait_sink,
         "everything waits, through pipes, sockets, locks or children, on one thread"),
    Rule(VerdictKind.WAIT_CHAIN, thread_died,
         "a thread died (its traceback ends the log) and the job polls or waits for its work"),
    Rule(VerdictKind.STRAGGLER, p2p_points_at,
         "stuck ranks wait in send/recv for a rank that is elsewhere (or missing)"),
    Rule(VerdictKind.P2P_DEADLOCK, p2p_unmatched,
         "every rank is stuck in send/recv with no peer readable: the pending ops do not match"),
    # The same two sides, but every busy rank's window shows work: slow, not a hang.
    Rule(VerdictKind.PROGRESSING, working_straggler,
         "the ranks the others wait for in a collective work (calls, I/O, GPU): slow"),
    Rule(VerdictKind.STRAGGLER, straggler,
         "some ranks run (CPU, JIT, I/O) while the others wait in a collective"),
    # Before the rules that read a loop woken now and then as progress: a server whose
    # startup never completed serves nothing, whatever else its loop does.
    Rule(VerdictKind.WAIT_CHAIN, startup_pending,
         "a server logged its startup's start, never its end, listens nowhere, and idles"),
    Rule(VerdictKind.WAIT_CHAIN, shutdown_pending,
         "a server logged its graceful shutdown's wait for connections, never its end, and "
         "holds connections open"),
    Rule(VerdictKind.WAIT_CHAIN, unaccepted_connections,
         "a listener's accept queue holds connections that no thread accepts or polls"),
    Rule(VerdictKind.PAUSED, held_stopped,
         "processes stopped (SIGSTOP) by a parent that lives and sleeps: held, not hung"),
    Rule(VerdictKind.PROGRESSING, awaits_turn,
         "every stuck subject waits for a framework's scheduled poll (Ray Train's report)"),
    Rule(VerdictKind.PROGRESSING, waits_on_work,
         "every stuck subject waits, through the wait-for graph, on a process that works"),
    Rule(VerdictKind.PROGRESSING, workers_starting,
         "every subject waits while the framework starts a worker, born during the dump, "
         "that computes"),
    Rule(VerdictKind.IDLE, calm, "every process is idle or paused: none waits for the job"),
    Rule(VerdictKind.ALL_WAITING, all_waiting, "every rank stuck on one signature"),
    Rule(VerdictKind.PROGRESSING, progressing, "stacks moved between samples"),
)


#: Where a multiprocessing child's own code starts: below it, a forked child's stack holds
#: the parent's frames that forked it (a DataLoader worker's: the training loop's).
_CHILD_ENTRY = "multiprocessing/process.py"


def _in_own_code(proc: Process) -> bool:
    """The working thread is in the program's own code, or in a library it called from
    there (a dataset's ``__getitem__`` waiting in ``threading.Event.wait``): a frame of the
    program's above the process's own entry point."""
    thread = proc.working_thread
    for frame in thread.frames if thread is not None else ():
        if frame.native:
            continue
        if not in_library(frame.file):
            return True
        if (frame.file or "").endswith(_CHILD_ENTRY):
            return False
    return False


def decide(facts: Facts, rules: tuple[Rule, ...] = RULES) -> Verdict:
    """The verdict of the first rule that holds."""
    for rule in rules:
        verdict = rule.holds(facts)
        if verdict is not None:
            return _no_helpers(facts, verdict)
    return unknown(facts)


def _no_helpers(facts: Facts, verdict: Verdict) -> Verdict:
    """Helpers (compile workers, data workers, the resource tracker) are no suspects, unless
    the program's own code is where one blocks (a DataLoader worker inside the dataset's
    ``__getitem__``): then it does the program's work, and holds it up."""
    # (nor a front end whose request waits for a reply nobody sends: the lost-reply pattern)
    waiting = {p.suspect for p in facts.snapshot.wait_graph.patterns if p.kind == "lost_reply"
               } if facts.snapshot.wait_graph is not None else set()
    helpers = {p.key for p in facts.snapshot.of_roles(*HELPER_ROLES)
               if not _in_own_code(p) and p.pid not in waiting}
    helper_pids = {pid for _, pid in helpers}
    if helper_pids.isdisjoint(verdict.suspects):
        return verdict
    # (host, PID): on several nodes a helper's PID may be a rank's PID on another node.
    hosts = verdict.suspect_hosts if len(verdict.suspect_hosts) == len(verdict.suspects) \
        else (None,) * len(verdict.suspects)
    kept = [(h, p) for h, p in zip(hosts, verdict.suspects, strict=True)
            if (h, p) not in helpers and (h is not None or p not in helper_pids)]
    return replace(verdict, suspects=tuple(p for _, p in kept),
                   suspect_hosts=tuple(h for h, _ in kept) if verdict.suspect_hosts else ())

