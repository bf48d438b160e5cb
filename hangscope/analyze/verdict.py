"""Decide what is wrong with the job: the first verdict whose rule holds wins.

Order (docs/architecture.md): no progress at all -> mismatched collectives -> missing rank ->
straggler -> local deadlock -> all waiting on the same thing -> progressing -> unknown.
Every verdict names ranks and carries the evidence a user can check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze.classify import process_category
from hangscope.analyze.group import compact_ranks, group_ranks
from hangscope.model import (
    Category,
    Group,
    Host,
    Job,
    Process,
    Role,
    Severity,
    Thread,
    Verdict,
    VerdictKind,
    rank_id,
)

WAITING = frozenset({Category.COLLECTIVE, Category.COMM_INIT, Category.CUDA_SYNC,
                     Category.CUDA_LAUNCH})
GONE = frozenset({Category.DEAD, Category.ZOMBIE, Category.STOPPED})
BUSY = frozenset({Category.RUNNING, Category.JIT_COMPILE, Category.IO, Category.GIL_WAIT})


def subjects_of(processes: Sequence[Process]) -> tuple[Process, ...]:
    """The processes the verdict is about: ranks, else engine cores, else every Python process."""
    ranks = tuple(p for p in processes if p.role is Role.RANK)
    if ranks:
        return ranks
    engines = tuple(p for p in processes if p.role is Role.ENGINE_CORE)
    if engines:
        return engines
    workers = tuple(p for p in processes if p.role is not Role.LAUNCHER and p.threads)
    if workers:
        return workers
    return tuple(p for p in processes if p.threads) or tuple(processes)


def _who(ranks: Sequence[int], is_rank: bool) -> str:
    if len(ranks) == 1:  # compact_ranks of one rank, without sorting a set (per-rank lines)
        return ("rank " if is_rank else "PID ") + str(ranks[0])
    if not is_rank:
        return ("PID " if len(ranks) == 1 else "PIDs ") + compact_ranks(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + compact_ranks(ranks)


_VERBS = {
    Category.COLLECTIVE: ("waits in {op}", "wait in {op}"),
    Category.COMM_INIT: ("waits in communicator init / rendezvous",
                         "wait in communicator init / rendezvous"),
    Category.CUDA_SYNC: ("waits for the GPU (CUDA sync)", "wait for the GPU (CUDA sync)"),
    Category.CUDA_LAUNCH: ("is blocked launching a CUDA kernel",
                           "are blocked launching a CUDA kernel"),
    Category.JIT_COMPILE: ("compiles a kernel (JIT)", "compile a kernel (JIT)"),
    Category.GIL_WAIT: ("waits for the GIL", "wait for the GIL"),
    Category.LOCK: ("waits on a lock", "wait on a lock"),
    Category.IPC_WAIT: ("waits on another process (IPC)", "wait on another process (IPC)"),
    Category.SLEEP: ("sleeps", "sleep"),
    Category.IO: ("waits on I/O", "wait on I/O"),
    Category.RUNNING: ("runs on CPU", "run on CPU"),
    Category.IDLE: ("is idle", "are idle"),
    Category.STOPPED: ("is stopped (state T)", "are stopped (state T)"),
    Category.ZOMBIE: ("has exited (zombie)", "have exited (zombies)"),
    Category.DEAD: ("has exited", "have exited"),
    Category.UNKNOWN: ("is somewhere unknown", "are somewhere unknown"),
}


def _doing(group: Group, plural: bool | None = None) -> str:
    many = len(group.ranks) > 1 if plural is None else plural
    what = _VERBS[group.category][1 if many else 0].format(op=group.op or "a collective")
    if group.site:
        what += f" at {group.site}"
    if group.context == "cuda_graph_capture":
        what += ", inside CUDA graph capture"
    return what


def _describe(group: Group, is_rank: bool) -> str:
    return f"{_who(group.ranks, is_rank)} {_doing(group)}"


def _evidence(procs: Sequence[Process]) -> list[str]:
    lines = []
    for proc in procs:
        working = proc.working_thread
        bits = [f"{_who([rank_id(proc)], proc.rank is not None)} (PID {proc.pid})",
                f"state {proc.state or '?'}"]
        if proc.cpu_percent is not None:
            bits.append(f"CPU {proc.cpu_percent:.0f}%")
        if working is not None:
            if working.wchan:
                bits.append(f"wchan {working.wchan}")
            if working.samples > 1:
                bits.append("stack unchanged in all "
                            f"{working.samples} samples" if working.stuck else "stack moved")
        lines.append(", ".join(bits))
    return lines


def _launcher_evidence(processes: Sequence[Process]) -> list[str]:
    """What the launcher does: usually waiting on the ranks it started."""
    lines = []
    for proc in processes:
        if proc.role is not Role.LAUNCHER:
            continue
        working = proc.working_thread
        category = process_category(proc)
        where = f" at {working.site}" if working and working.site else ""
        kids = ", ".join(str(c) for c in proc.children[:8])
        lines.append(f"launcher (PID {proc.pid}) {_VERBS[category][0].format(op='a collective')}"
                     f"{where}; its children: {kids or 'none'}")
    return lines


def with_gpu_evidence(verdict: Verdict, processes: Sequence[Process],
                      hosts: Sequence[Host]) -> Verdict:
    """Add one line per rank and GPU: utilisation, memory, and what GPU and host do together.

    Only GPUs NVML read get a line; without a driver the snapshot's note says so once.
    """
    from hangscope.analyze.gpu import gpu_evidence

    lines = gpu_evidence(subjects_of(processes), processes, hosts)
    if not lines:
        return verdict
    return replace(verdict, evidence=(*verdict.evidence, *lines))


def _stuck(proc: Process, samples: int) -> bool:
    if samples <= 1:
        return True
    working = proc.working_thread
    if process_category(proc, working) in GONE:
        return True
    if working is None:
        return False
    # Stuck unless a change was *seen*: a sample that failed (py-spy timed out under load)
    # is no evidence that the stack moved.
    return working.samples <= 1 or working.unchanged_samples >= working.samples


def _lock_threads(proc: Process) -> list[Thread]:
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
        if leaf is not None and leaf.file and leaf.file.endswith(("threading.py", "queue.py")) \
                and leaf.name.rsplit(".", 1)[-1] in ("wait", "get", "wait_for"):
            continue  # waiting to be notified (Event, Condition, Queue): idle, not a lock cycle
        out.append(thread)
    return out


def diagnose(processes: Sequence[Process], job: Job,
             samples: int) -> tuple[Verdict, tuple[Group, ...]]:
    """The verdict for the job and the groups it rests on, with what the launcher does."""
    verdict, groups = _decide(processes, job, samples)
    extra = _launcher_evidence(processes)
    if extra:
        verdict = replace(verdict, evidence=(*verdict.evidence, *extra))
    return verdict, groups


def _decide(processes: Sequence[Process], job: Job,
            samples: int) -> tuple[Verdict, tuple[Group, ...]]:
    subjects = subjects_of(processes)
    is_rank = any(p.rank is not None for p in subjects)
    groups = group_ranks(subjects)
    if not subjects:
        return Verdict(VerdictKind.NO_TARGET, Severity.WARNING,
                       "No process of the job could be read."), groups
    stuck_of = [_stuck(p, samples) for p in subjects]
    stuck = [p for p, s in zip(subjects, stuck_of, strict=True) if s]
    categories = {p.pid: process_category(p) for p in subjects}
    # PIDs with a subject that is not stuck (sets, not tuple scans: 131,072 ranks).
    moving_pids = {p.pid for p, s in zip(subjects, stuck_of, strict=True) if not s}

    # 1. Mismatched collectives: stuck ranks wait in different collectives or call sites.
    coll_groups = [g for g in groups if g.category is Category.COLLECTIVE
                   and moving_pids.isdisjoint(g.pids)]
    if len(coll_groups) > 1:
        ordered = sorted(coll_groups, key=lambda g: (-len(g.ranks), g.ranks))
        largest = len(ordered[0].ranks)
        tie = sum(1 for g in ordered if len(g.ranks) == largest) > 1
        suspects_groups = ordered if tie else [g for g in ordered if len(g.ranks) < largest]
        summary = "Mismatched collectives: " + "; ".join(_describe(g, is_rank) for g in ordered)
        if tie:
            summary += ". The groups are the same size: no majority says which side is wrong."
        else:
            odd = [r for g in suspects_groups for r in g.ranks]
            summary += f". The odd one out is {_who(odd, is_rank)}."
        suspects = tuple(pid for g in suspects_groups for pid in g.pids)
        chosen = {id(g) for g in coll_groups}
        others = [g for g in groups if id(g) not in chosen]
        evidence = [f"{g.signature}: {_who(g.ranks, is_rank)}" for g in ordered + others]
        return Verdict(VerdictKind.MISMATCHED_COLLECTIVES, Severity.CRITICAL, summary,
                       suspects, tuple(evidence)), groups

    waiting = [p for p in subjects if categories[p.pid] in WAITING]
    gone = [p for p in subjects if categories[p.pid] in GONE]
    found = len([p for p in subjects if p.role is Role.RANK])

    # 2. Missing rank: fewer ranks than the launcher asked for, or a rank exited or stopped.
    if (job.expected_ranks is not None and found < job.expected_ranks) or gone:
        parts = []
        if job.expected_ranks is not None and found < job.expected_ranks:
            parts.append(f"expected {job.expected_ranks} ranks ({job.expected_source}), "
                         f"found {found}")
        for proc in gone:
            parts.append(f"{_who([rank_id(proc)], is_rank)} (PID {proc.pid}) "
                         f"{_doing(Group('', categories[proc.pid], None, None, (), ()))}")
        rest = [g for g in groups if g.category not in GONE]
        if rest:
            parts.append("; ".join(_describe(g, is_rank) for g in rest))
        suspects = tuple(p.pid for p in gone) or tuple(
            p.pid for p in processes if p.role is Role.LAUNCHER)
        return Verdict(VerdictKind.MISSING_RANK, Severity.CRITICAL,
                       "Missing rank: " + "; ".join(parts) + ".", suspects,
                       tuple(_evidence(subjects))), groups

    # 3. Straggler: some ranks work while the others wait for them in a collective.
    busy = [p for p in subjects if categories[p.pid] in BUSY or (
        categories[p.pid] not in WAITING and categories[p.pid] not in GONE
        and waiting and len(waiting) >= len(subjects) / 2)]
    stuck_ids = {id(p) for p in stuck}
    if waiting and busy and all(id(p) in stuck_ids for p in waiting):
        busy_pids = {p.pid for p in busy}
        busy_groups = [g for g in groups if not busy_pids.isdisjoint(g.pids)]
        chosen = {id(g) for g in busy_groups}
        wait_groups = [g for g in groups if id(g) not in chosen]
        summary = ("Straggler: " + "; ".join(_describe(g, is_rank) for g in busy_groups)
                   + ", while " + "; ".join(_describe(g, is_rank) for g in wait_groups)
                   + " for it.")
        return Verdict(VerdictKind.STRAGGLER, Severity.CRITICAL, summary,
                       tuple(p.pid for p in busy), tuple(_evidence(subjects))), groups

    # 4. Local deadlock: two or more threads of one process stuck acquiring locks.
    for proc in subjects:
        locked = _lock_threads(proc)
        if len(locked) >= 2 and _stuck(proc, samples) and all(
                t.stuck or samples <= 1 for t in locked):
            names = ", ".join(f"{t.name or t.tid} at {t.site or '?'}" for t in locked[:6])
            if len(locked) > 6:
                names += f", and {len(locked) - 6} more"
            summary = (f"Local deadlock in PID {proc.pid}: {len(locked)} threads wait on locks "
                       f"that the others hold ({names}). A lock-order inversion: make every "
                       "thread take the locks in the same order.")
            evidence = [f"thread {t.name or t.tid} (tid {t.tid}): {t.category} at {t.site}, "
                        f"wchan {t.wchan or '?'}" for t in locked]
            return Verdict(VerdictKind.LOCAL_DEADLOCK, Severity.CRITICAL, summary, (proc.pid,),
                           tuple(evidence)), groups

    # 5. Everyone waits on the same thing.
    if len(groups) == 1 and stuck:
        group = groups[0]
        advice = {
            Category.COLLECTIVE: " Every rank arrived at the same collective, so the block is "
            "below Python: look at the GPU (a spinning kernel), the network, or a rank on "
            "another node.",
            Category.COMM_INIT: " A peer never joined the rendezvous: check the other nodes, "
            "MASTER_ADDR/MASTER_PORT and the network.",
            Category.IPC_WAIT: " They wait on another process: look at the one that should "
            "send (the launcher, the engine, a dead worker).",
            Category.CUDA_SYNC: " The GPU does not finish its work: look at GPU utilisation "
            "and at the kernel queued before the sync.",
        }.get(group.category, "")
        summary = f"All waiting: {_describe(group, is_rank)}.{advice}"
        return Verdict(VerdictKind.ALL_WAITING, Severity.WARNING, summary, (),
                       tuple(_evidence(subjects))), groups

    # 6. Progressing: stacks move between samples.
    moving = [p for p, s in zip(subjects, stuck_of, strict=True) if not s]
    if moving:
        summary = (f"Progressing: {_who([rank_id(p) for p in moving], is_rank)} changed stack "
                   f"between samples: slow rather than hung.")
        if len(moving) < len(subjects):
            moved = {id(p) for p in moving}
            still = [rank_id(p) for p in subjects if id(p) not in moved]
            summary += f" {_who(still, is_rank)} did not move."
        return Verdict(VerdictKind.PROGRESSING, Severity.INFO, summary, (),
                       tuple(_evidence(subjects))), groups

    summary = "Blocked: " + "; ".join(_describe(g, is_rank) for g in groups) + "."
    return Verdict(VerdictKind.UNKNOWN, Severity.WARNING, summary, (),
                   tuple(_evidence(subjects))), groups
