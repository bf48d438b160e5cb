"""The refresh economy: a live view's refresh pays only for what changed since the last one.

A native ``py-spy dump`` of a torch rank costs ~0.5 s of a core and pauses the rank; a live
view (``hangscope attach``) refreshes every few seconds, and a hung rank's stacks rarely
change. So each process's last stacks are remembered with the scheduler counters of its
threads at a moment they were exact: when no Python thread has run since, the stacks are
still the same and py-spy is not run at all; when only Python stacks are asked for, a read
that does not pause the process is used when it is exact. The sampler (live/sampler.py) decides
what to sample and when; this module decides, per process and round, how cheaply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from hangscope.collect import procfs, pyspy
from hangscope.live.rounds import ASLEEP, Marks, Round, stack_key
from hangscope.model import Process, StackKey

#: How the sampler dumps one process: (process, native, nonblocking) -> its dump, None when
#: it does not run Python.
Dump = Callable[[Process, bool, bool], pyspy.DumpResult | None]


@dataclass
class Known:
    """What the last sample of a process learnt, for the next one (a live view's tick)."""

    create_time: float | None
    dump: pyspy.DumpResult  # native when native stacks were asked for
    keys: dict[int, StackKey]  # Python stack by tid
    states: dict[int, tuple[str | None, str | None]]  # (state, wchan) by tid, at the dump
    marks: Marks | None  # when the stacks were last known exact; None: not since the dump
    info: procfs.ProcInfo | None = None  # the /proc facts of the last round


class Refresher:
    """Samples one process per call as cheaply as what it already knows allows."""

    def __init__(self, dump: Dump, native_slots: int, nonblocking: bool) -> None:
        self._dump = dump
        self._nonblocking = nonblocking
        # Native dumps at once: each keeps a core busy and pauses its target meanwhile.
        self._native_gate = threading.BoundedSemaphore(native_slots)
        # What the last sample of each process learnt: its stacks, and when they were last
        # known exact.
        self.known: dict[int, Known] = {}

    def keep(self, pids: Collection[int]) -> None:
        """Forget every process but these (the ones a new snapshot found)."""
        self.known = {pid: k for pid in pids if (k := self.known.get(pid)) is not None}

    def forget(self, pid: int) -> None:
        self.known.pop(pid, None)

    def sample(self, proc: Process, native: bool, fds: bool, unpaused: bool = False) -> Round:
        """One process's stacks and /proc facts for one round, paying as little as it can.

        1. None of its Python threads has run since a moment its stacks were known exactly
           (same scheduler counters, still asleep): those stacks, and py-spy is not run.
        2. Its stacks are known, or only Python stacks are wanted: a Python-only read that
           does not pause it (``--nonblocking``), exact when no Python thread ran during the
           read (counters before = after), else taken again with py-spy's own short pause.
           Same Python stacks, thread states and wchans as the known native dump: that dump.
        3. Otherwise (a cold start, or the stacks moved): ``py-spy dump --native``, at most
           one per core at a time.

        ``unpaused``: this process computes (the sampler's cheap kernel facts): read it as
        ``--nonblocking`` does, Python only and never paused.
        """
        pid = proc.pid
        with_fds = native or fds
        if proc.python is False:
            return Round(None, procfs.read_process(pid, with_fds=with_fds))
        nonblocking = self._nonblocking or unpaused
        want_native = native and not nonblocking
        known = self.known.get(pid)
        if known is not None and (known.create_time != proc.create_time
                                  or (want_native and not known.dump.native)):
            known = None
        before = None
        if known is not None and known.marks is not None:
            before = procfs.read_tasks(pid)
            if known.marks.still(before):
                return Round(known.dump, _facts(pid, with_fds, before, known),
                             anchor=known.marks)
        if known is not None or not want_native:
            fresh, after, marks, at_dump = self._python_read(proc, before, known, nonblocking)
            if fresh is not None and fresh.ok and known is not None and _same_stacks(
                    fresh, at_dump, known):
                return Round(known.dump, _facts(pid, with_fds, after, known), anchor=marks)
            if not want_native or fresh is None or not fresh.ok:
                return Round(fresh, _facts(pid, with_fds, after, known), anchor=marks,
                             at_dump=at_dump)
        with self._native_gate:
            at_dump = procfs.read_tasks(pid)
            dump = self._dump(proc, want_native, nonblocking)
        return Round(dump, procfs.read_process(pid, with_fds=with_fds), at_dump=at_dump)

    def _python_read(self, proc: Process, before: tuple[procfs.TaskInfo, ...] | None,
                     known: Known | None, nonblocking: bool
                     ) -> tuple[pyspy.DumpResult | None, tuple[procfs.TaskInfo, ...],
                                Marks | None, tuple[procfs.TaskInfo, ...]]:
        """Python stacks without pausing the process when that is exact: (dump, threads after
        it, marks if exact, threads as they were when the stacks were read)."""
        pid = proc.pid
        if before is None:
            before = procfs.read_tasks(pid, wchan=False)  # counters: did a thread run?
        python = set(known.keys) if known is not None else {t.tid for t in before}
        quiet = all(t.state in ASLEEP and t.sched is not None
                    for t in before if t.tid in python)
        if quiet or nonblocking:
            fresh = self._dump(proc, False, True)
            after = procfs.read_tasks(pid)
            if fresh is None or not fresh.ok:
                return fresh, after, None, after
            marks = Marks.between(before, after, {t.tid for t in fresh.threads})
            if marks is not None or nonblocking:
                return fresh, after, marks, after
        # A Python thread ran: the unpaused read may be torn, so pause (py-spy's own pause).
        # Thread states are read before it: after it, the threads are resuming from the stop.
        at_dump = procfs.read_tasks(pid)
        fresh = self._dump(proc, False, False)
        return fresh, procfs.read_tasks(pid), None, at_dump

    def learn(self, proc: Process, sample: Round) -> None:
        """Remember what a round saw of one process, for the next round or refresh."""
        dump = sample.dump
        if dump is None or not dump.ok:
            self.known.pop(proc.pid, None)
            return
        known = self.known.get(proc.pid)
        if known is not None and known.dump is dump:
            known.marks = sample.anchor
            known.info = sample.proc
            return
        keys = {t.tid: stack_key(t) for t in dump.threads}
        tasks = sample.at_dump if sample.at_dump is not None else sample.proc.tasks
        self.known[proc.pid] = Known(
            create_time=proc.create_time, dump=dump, keys=keys,
            states={t.tid: (t.state, t.wchan) for t in tasks if t.tid in keys},
            marks=sample.anchor, info=sample.proc)

    def native_seconds(self, pid: int) -> float | None:
        """What the last native dump of ``pid`` took, if one is known."""
        known = self.known.get(pid)
        return known.dump.seconds if known is not None and known.dump.native else None


def _facts(pid: int, with_fds: bool, tasks: tuple[procfs.TaskInfo, ...],
           known: Known | None) -> procfs.ProcInfo:
    """``read_process``, keeping the last round's open files when no thread of the process
    has run since (only its own threads change its fd table): a rank holds ~100 fds."""
    prev = known.info if known is not None else None
    if not with_fds or prev is None or prev.num_fds is None or not _all_still(prev.tasks,
                                                                               tasks):
        return procfs.read_process(pid, with_fds, tasks)
    return replace(procfs.read_process(pid, False, tasks), fds=prev.fds,
                   num_fds=prev.num_fds, fd_limit=prev.fd_limit, fd_targets=prev.fd_targets,
                   log_files=prev.log_files, socket_inodes=prev.socket_inodes,
                   permission_denied=prev.permission_denied)


def _all_still(was: Sequence[procfs.TaskInfo], now: Sequence[procfs.TaskInfo]) -> bool:
    """Whether no thread at all ran between two reads (every one asleep, same counters)."""
    if len(was) != len(now):
        return False
    return all(a.tid == b.tid and a.state == b.state and a.state in ASLEEP
               and a.sched is not None and a.sched == b.sched
               for a, b in zip(was, now, strict=True))


def _same_stacks(fresh: pyspy.DumpResult, tasks: Sequence[procfs.TaskInfo],
                 known: Known) -> bool:
    """Same Python stacks, thread states and wchans as the known dump: keep its native stacks."""
    if {t.tid: stack_key(t) for t in fresh.threads} != known.keys:
        return False
    return {t.tid: (t.state, t.wchan) for t in tasks if t.tid in known.keys} == known.states
