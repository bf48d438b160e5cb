"""The facts record: everything the verdict rules read, derived once per snapshot.

A rule (analyze/rules/) is a function of one :class:`Facts`; it never re-derives what is
here. To give the rules a new kind of evidence (collective positions from the Flight
Recorder or NCCL RAS, point-to-point wait-for edges, lock holders, rank coordinates across
nodes), add one ``cached_property`` below that derives it from ``self.snapshot``:
every rule then reads it as ``facts.<name>``. Evidence a collector stores on the Snapshot is
already there as ``facts.snapshot.<field>``. Unit tests build Facts from real snapshots the same
way (tests/unit/test_verdict_rules.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, TypeVar

from hangscope.analyze.evidence.compiling import CompileActivity, compile_activity
from hangscope.analyze.evidence.group import group_ranks
from hangscope.analyze.evidence.locks import LockWait, file_lock_waits
from hangscope.analyze.evidence.progress import PROGRESSING, SLOW, STUCK
from hangscope.analyze.evidence.world import MissingRanks, missing_ranks
from hangscope.frameworks import RANK_LAUNCHERS, in_zmq_wait
from hangscope.model import (
    NOT_RUNNING,
    Category,
    Frame,
    Group,
    Job,
    Process,
    ProcessKey,
    Role,
    Snapshot,
    Thread,
    category_of,
)
from hangscope.model.progress import RankProgress
from hangscope.model.waits import OutsideProcess, P2PCall


class _PidRecord(Protocol):
    @property
    def pid(self) -> int: ...


R = TypeVar("R", bound=_PidRecord)

#: A rank in one of these categories waits for a peer or for its GPU.
WAITING = frozenset({Category.COLLECTIVE, Category.COMM_INIT, Category.CUDA_SYNC,
                     Category.CUDA_LAUNCH})
#: A rank in one of these categories does work of its own (the straggler's side).
BUSY = frozenset({Category.RUNNING, Category.SPIN, Category.JIT_COMPILE, Category.IO,
                  Category.GIL_WAIT})
#: A rank in one of these categories runs no code at all.
GONE = NOT_RUNNING


#: Job kinds whose launcher starts ranks (a multiprocessing or Ray job may have none).
_RANK_LAUNCHERS = RANK_LAUNCHERS


@dataclass(frozen=True)
class Facts:
    """What the verdict rules know about one job: the snapshot, plus what is derived from it.

    Every field of the Snapshot (and any evidence a collector adds to it) is reachable as
    ``facts.snapshot.<field>``; what several rules need derived from it is a field or a
    ``cached_property`` here, computed once.
    """

    snapshot: Snapshot  # classified processes; no verdict yet
    subjects: tuple[Process, ...]  # what the verdict is about (model.subjects_of)
    groups: tuple[Group, ...]  # subjects by signature, largest first
    # Keyed by (host, PID), never PID alone: on a merged multi-node dump PIDs repeat, and a
    # rule must read each rank's own category and stuck-ness (Process.key).
    categories: dict[ProcessKey, Category]  # subject (host, PID) -> its category
    stuck: frozenset[ProcessKey]  # subjects whose working stack never moved in the window

    @property
    def processes(self) -> tuple[Process, ...]:
        return self.snapshot.processes

    @property
    def job(self) -> Job:
        return self.snapshot.job

    @property
    def samples(self) -> int:
        return self.snapshot.samples

    @cached_property
    def is_rank(self) -> bool:
        """The subjects have rank numbers (else reports say ``PID``)."""
        return any(p.rank is not None for p in self.subjects)

    @cached_property
    def has_ranks(self) -> bool:
        """The job is a world of ranks (a launcher asked for some, or a process is one): only
        there is an exited or zombie process a missing *rank*; a shell that a Python tool ran
        and that exited is a child not yet reaped."""
        job = self.job
        # A process waiting in a collective or a rendezvous is a rank, numbered or not
        # (mp.spawn's children carry no RANK variable).
        return job.expected_ranks is not None or job.kind in _RANK_LAUNCHERS or any(
            p.rank is not None or p.role in (Role.RANK, Role.ENGINE_CORE)
            for p in self.processes) or any(
            c in (Category.COLLECTIVE, Category.COMM_INIT) for c in self.categories.values())

    @cached_property
    def moving(self) -> frozenset[ProcessKey]:
        """Subjects whose stack was seen to change (sets, not scans: 131,072 ranks)."""
        return frozenset(self.categories.keys() - self.stuck)  # keyed by every subject

    @cached_property
    def progress(self) -> dict[ProcessKey, RankProgress]:
        """Subject (host, PID) -> what the progress watcher measured (empty: it did not watch)."""
        return measured(self.snapshot)

    @cached_property
    def slow(self) -> tuple[Process, ...]:
        """Stuck-looking subjects whose measured evidence says slow: not proven hung."""
        return tuple(p for p in self.subjects if p.key in self.stuck
                     and (m := self.progress.get(p.key)) is not None and m.decision == SLOW
                     and m.evidence != "none")

    @cached_property
    def waiting(self) -> tuple[Process, ...]:
        """Subjects that wait for a peer or the GPU."""
        return tuple(p for p in self.subjects if self.categories[p.key] in WAITING)

    @cached_property
    def gone(self) -> tuple[Process, ...]:
        """Subjects that exited, are zombies, or are stopped."""
        return tuple(p for p in self.subjects if self.categories[p.key] in GONE)

    @cached_property
    def ranks_found(self) -> int:
        """How many subjects are ranks (against ``job.expected_ranks``)."""
        return sum(1 for p in self.subjects if p.role is Role.RANK)

    @cached_property
    def launchers(self) -> tuple[Process, ...]:
        return self.snapshot.of_roles(Role.LAUNCHER)

    @cached_property
    def lock_waits(self) -> tuple[LockWait, ...]:
        """File-lock waiters of the job, each with the lock's holder and file (/proc/locks)."""
        waits = self.snapshot.waits
        if waits is None:
            return ()
        return file_lock_waits(self.processes, waits.file_locks, waits.lock_files())

    @cached_property
    def outside(self) -> dict[int, OutsideProcess]:
        """PID -> a process outside the job that its waits lead to (collect/outside.py)."""
        waits = self.snapshot.waits
        return {o.pid: o for o in waits.outside} if waits is not None else {}

    @cached_property
    def p2p_calls(self) -> dict[int, P2PCall]:
        """Global rank -> the send/recv it waits in and its peer (py-spy --locals)."""
        waits = self.snapshot.waits
        records = [r for r in waits.locals if r.p2p] if waits is not None else []
        calls = {key: r.p2p for key, r in by_key(self.processes, records).items() if r.p2p}
        return {p.rank.global_rank: calls[p.key] for p in self.subjects
                if p.key in calls and p.rank is not None and p.rank.global_rank is not None}

    @cached_property
    def missing(self) -> MissingRanks | None:
        """The expected world against the ranks found (analyze/evidence/world.py)."""
        return missing_ranks(self.processes, self.job)

    @cached_property
    def compiles(self) -> tuple[CompileActivity, ...]:
        """Subjects compiling (Dynamo/Inductor/Triton), with their helpers."""
        # compile_activity reads one node's process tree: its PIDs are unique only per host.
        keys = {p.key for p in self.subjects}
        return tuple(a for a in compile_activity(self.processes)
                     if any(k in keys for k in unique_keys(self.processes, a.pid)))


def is_stuck(proc: Process, samples: int) -> bool:
    """The process did not move in the window (one sample: assumed stuck)."""
    working = proc.working_thread
    return _stuck(working, category_of(proc, working), samples)


def _stuck(working: Thread | None, category: Category, samples: int) -> bool:
    """``is_stuck`` of a process whose working thread and category the caller holds."""
    if samples <= 1:
        return True
    if category in GONE:
        return True
    if working is None:
        return False
    # Stuck unless a change was *seen*: a sample that failed (py-spy timed out under load)
    # is no evidence that the stack moved. Nor is a change inside a framework's spin-then-poll
    # wait that now sleeps in its poll (vLLM's worker, dumped within a second of its last
    # message: round one sees ``sched_yield``, the later rounds the zmq poll): one wait.
    return blocked(working)


def blocked(thread: Thread) -> bool:
    """Its stack never moved in the window (one sample: assumed), or it sleeps in the kernel
    inside a framework's spin-then-poll wait for a message (hangscope/frameworks ``zmq_waits``:
    samples catch it in ``sched_yield`` or in the poll, one wait either way). The wait-for
    graph asks it of the threads it follows."""
    return thread.samples <= 1 or thread.unchanged_samples >= thread.samples or (
        thread.state == "S" and any(not f.native and in_zmq_wait(f.file)
                                    for f in thread.frames[:10]))


def all_working(snap: Snapshot, pids: Sequence[int],
                test: Callable[[Sequence[Frame]], bool]) -> bool:
    """Every process of ``pids`` (one at least) has a working thread whose stack passes
    ``test`` (DDP's backward, FSDP's hooks)."""
    procs = [snap.process(pid) for pid in pids]
    return bool(procs) and all(p is not None and (w := p.working_thread) is not None
                               and test(w.frames) for p in procs)


def unique_keys(processes: Sequence[Process], pid: int) -> tuple[ProcessKey, ...]:
    """The (host, PID) a PID-only record names: the one process with that PID, or none.

    Progress and wait records carry a PID and no host. On a merged multi-node dump a PID may
    be a rank on each of several nodes; such a record cannot say whose it is, so it is
    matched to nobody rather than to the wrong rank (each node's own dump matched it).
    """
    found = [p.key for p in processes if p.pid == pid]
    return tuple(found) if len(found) == 1 else ()


def by_key(processes: Sequence[Process], records: Iterable[R]) -> dict[ProcessKey, R]:
    """(host, PID) -> the PID-only record of that process, where its PID is unique."""
    count: dict[int, list[ProcessKey]] = {}
    for proc in processes:
        count.setdefault(proc.pid, []).append(proc.key)
    return {keys[0]: r for r in records if len(keys := count.get(r.pid, [])) == 1}


def measured(snap: Snapshot) -> dict[ProcessKey, RankProgress]:
    """(host, PID) -> the progress decision the watcher measured for it (empty without one)."""
    return by_key(snap.processes, snap.progress.ranks) if snap.progress is not None else {}


def stuck_measured(proc: Process, samples: int, progress: RankProgress | None) -> bool:
    """Stuck by the measured evidence where it decided; else by the stack samples."""
    working = proc.working_thread
    return _stuck_measured(working, category_of(proc, working), samples, progress)


def _stuck_measured(working: Thread | None, category: Category, samples: int,
                    progress: RankProgress | None) -> bool:
    if progress is not None and category not in GONE:
        if progress.decision == PROGRESSING:
            return False
        if progress.decision == STUCK:
            return True
    return _stuck(working, category, samples)  # slow, or no evidence: what the samples saw


def sampled_and_moved(procs: Iterable[Process]) -> tuple[list[Process], list[Process]]:
    """The processes whose working thread was sampled more than once, and of those the ones
    whose stack changed (not ``Thread.stuck``), in order: one pass over them, where two read
    each of 131,072 ranks twice from memory no cache holds."""
    sampled: list[Process] = []
    moved: list[Process] = []
    for p in procs:
        if (w := p.working_thread) is not None and w.samples > 1:
            sampled.append(p)
            if w.unchanged_samples < w.samples:
                moved.append(p)
    return sampled, moved


#: A process without a Python stack that used this much of a CPU over the window computes.
_NATIVE_BUSY_PERCENT = 50.0


def computes_unsampled(proc: Process) -> bool:
    """A process with no stack to compare (not Python: an ``xz``, ``ffmpeg`` or ``tar`` child
    doing the job's work) that used most of a CPU over the window: it moves. "Stuck" was
    only ever the default for a stack that could not be seen to change."""
    if proc.python is not False or proc.is_exited or proc.is_stopped:
        return False
    return (proc.cpu_percent or 0.0) >= _NATIVE_BUSY_PERCENT


def facts_of(snap: Snapshot) -> Facts:
    """Derive the facts record from a snapshot whose processes are classified."""
    subjects = snap.subjects
    progress = measured(snap)
    samples = snap.samples
    # One pass, each subject's working thread found once (131,072 ranks). Where no progress
    # was measured for it, a subject's category and stuck-ness follow from a few fields (its
    # state, its working thread's category and sample counts, what computes_unsampled reads):
    # worked out once per distinct set of them, as 131,072 ranks share a handful.
    categories: dict[ProcessKey, Category] = {}
    stuck = []
    seen: dict[tuple[object, ...], tuple[Category, bool]] = {}
    for proc in subjects:
        key = proc.key  # cached: the rules ask it of every subject again
        working = proc.working_thread
        measured_here = progress.get(key) if progress else None
        if measured_here is None:
            inputs = (proc.state, proc.python, proc.cpu_percent) if working is None else (
                proc.state, proc.python, proc.cpu_percent, working.category,
                working.samples, working.unchanged_samples)
            found = seen.get(inputs)
            if found is None:
                category = category_of(proc, working)
                found = seen[inputs] = (category, _stuck_measured(
                    working, category, samples, None) and not computes_unsampled(proc))
            categories[key], is_stuck = found
        else:
            category = categories[key] = category_of(proc, working)
            is_stuck = _stuck_measured(working, category, samples, measured_here) \
                and not computes_unsampled(proc)
        if is_stuck:
            stuck.append(key)
    return Facts(snapshot=snap, subjects=subjects, groups=group_ranks(subjects),
                 categories=categories, stuck=frozenset(stuck))
