"""Discover a job and sample every process in parallel over a short window: raw Snapshots.

The sampler is the pipeline's only stage with side effects: it runs the collectors, several
rounds over ``window`` seconds, then hands detached data to ``hangscope.analyze``.
Round one takes native stacks (slow: py-spy reads libtorch's symbols); later rounds are
Python-only (milliseconds) and only tell stuck (same stack) from slow (stack moved).
"""

from __future__ import annotations

import os
import platform
import socket
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import psutil

from hangscope import __version__
from hangscope.analyze import analyze
from hangscope.analyze.roles import (
    expected_ranks,
    job_kind,
    launcher_args,
    role_and_rank,
    title_of,
)
from hangscope.collect import exitcode, kmsg, logs, nvml, procfs, pyspy, tree
from hangscope.errors import PermissionDenied, ProcessNotFound
from hangscope.model import (
    Host,
    Job,
    Process,
    RankInfo,
    Role,
    Snapshot,
    Thread,
)
from hangscope.redact import redact_argv, redact_env, redact_text
from hangscope.serialize import scrub


@dataclass(frozen=True)
class SampleOptions:
    """How to sample: ``hangscope dump --samples K --window S --no-native --timeout T``."""

    samples: int = 3
    window: float = 2.0
    native: bool = True
    timeout: float = 10.0
    nonblocking: bool = False
    redact: bool = True
    # Parallel py-spy runs. Default: native dumps one per core (each is CPU-bound, and more
    # at once only lengthens every target's pause), Python-only reads two per core, at most 32.
    workers: int | None = None


@dataclass
class _Round:
    """One sampling round of one process."""

    dump: pyspy.DumpResult | None
    proc: procfs.ProcInfo
    reused: bool = False  # the PID now belongs to a process that started after discovery
    # The scheduler counters at a moment the stacks of ``dump`` were exact, if one is known.
    anchor: _Marks | None = None
    # The threads just before a blocking dump stopped them (the read after it sees them
    # resuming from the stop): their states and wchans are the ones the dump's stacks had.
    at_dump: tuple[procfs.TaskInfo, ...] | None = None


@dataclass(frozen=True)
class _Marks:
    """A process's threads at a moment its Python stacks were known exactly.

    ``tids``: every thread then. ``python``: (state, (ns on CPU, times scheduled)) of each
    Python thread, all asleep. Equal again later means none of them has run since, so the
    stacks are still the same: no py-spy, no pause.
    """

    tids: frozenset[int]
    python: dict[int, tuple[str | None, tuple[int, int] | None]]

    @staticmethod
    def between(before: Sequence[procfs.TaskInfo], after: Sequence[procfs.TaskInfo],
                python: Collection[int]) -> _Marks | None:
        """Marks when no Python thread ran between the two reads (a read in between is
        exact, though it did not pause the process); None when one did or it cannot tell."""
        tids = frozenset(t.tid for t in after)
        if frozenset(t.tid for t in before) != tids or not set(python) <= tids:
            return None
        was = {t.tid: (t.state, t.sched) for t in before if t.tid in python}
        now = {t.tid: (t.state, t.sched) for t in after if t.tid in python}
        if was != now or not all(v[0] in _ASLEEP and v[1] is not None for v in now.values()):
            return None
        return _Marks(tids, now)

    def still(self, tasks: Sequence[procfs.TaskInfo]) -> bool:
        """Whether none of the Python threads has run since the marks were taken."""
        if frozenset(t.tid for t in tasks) != self.tids:
            return False
        return {t.tid: (t.state, t.sched) for t in tasks
                if t.tid in self.python} == self.python


_ASLEEP = frozenset("SD")  # a thread in these states is not on a CPU


@dataclass
class _Known:
    """What the last sample of a process learnt, for the next one (a live view's tick)."""

    create_time: float | None
    dump: pyspy.DumpResult  # native when native stacks were asked for
    keys: dict[int, tuple[tuple[str, str | None, int | None], ...]]  # Python stack by tid
    states: dict[int, tuple[str | None, str | None]]  # (state, wchan) by tid, at the dump
    marks: _Marks | None  # when the stacks were last known exact; None: not since the dump
    info: procfs.ProcInfo | None = None  # the /proc facts of the last round


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _workers(options: SampleOptions, n: int) -> int:
    if options.workers:
        return max(1, options.workers)
    # A Python-only py-spy run is short and partly waits (exec, /proc/PID/maps), so two per
    # core keep the cores busy; native runs are held to one per core by _native_slots.
    return max(1, min(n, 2 * _cores(), 32))


def _native_slots(options: SampleOptions) -> int:
    """Native dumps at once: each keeps a core busy reading symbols (libtorch: ~0.5 s), and
    the target stays paused while py-spy unwinds, so a dump that waits for a core pauses its
    target longer for nothing."""
    return max(1, options.workers or _cores())


def _stack_key(thread: pyspy.PyThread) -> tuple[tuple[str, str | None, int | None], ...]:
    return tuple((f.name, f.file, f.line) for f in thread.frames if not f.native)


def _assign_spawn_order(procs: list[Process]) -> list[Process]:
    """Number unnamed multiprocessing children of one parent by start time, when 2+ exist."""
    by_parent: dict[int | None, list[Process]] = {}
    for proc in procs:
        if proc.role is Role.OTHER and proc.rank is None and proc.python and (
                "multiprocessing" in (proc.title or "")
                or _forked_copy(proc, procs)):
            by_parent.setdefault(proc.ppid, []).append(proc)
    renumbered: dict[int, Process] = {}
    for siblings in by_parent.values():
        if len(siblings) < 2:
            continue
        siblings.sort(key=lambda p: (p.create_time or 0.0, p.pid))
        for i, proc in enumerate(siblings):
            renumbered[proc.pid] = replace(proc, role=Role.RANK,
                                           rank=RankInfo(global_rank=i, source="spawn-order"))
    return [renumbered.get(p.pid, p) for p in procs]


def _forked_copy(proc: Process, procs: list[Process]) -> bool:
    parent = next((p for p in procs if p.pid == proc.ppid), None)
    return parent is not None and bool(proc.cmdline) and parent.cmdline == proc.cmdline


class Sampler:
    """Takes Snapshots of the job that a PID belongs to.

    Keeps what does not change between refreshes (the process tree's identity, each rank's
    native stack while its Python stack is unchanged) so a live view pays less per tick.
    """

    def __init__(self, pid: int, options: SampleOptions | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.target = pid
        self.options = options or SampleOptions()
        self.clock = clock
        self._pyspy = pyspy.find_pyspy()
        tree.check_target(pid)
        # Start times tell a live process from a later one that got its PID (long `attach`).
        self._target_started = _start_time(pid)
        self._launcher_started: float | None = None
        # What the last sample of each process learnt (see _sample): its stacks, and when
        # they were last known exact.
        self._known: dict[int, _Known] = {}
        self._native_gate = threading.BoundedSemaphore(_native_slots(self.options))
        self._discovered: dict[int, tree.Found] = {}
        self._fixed: tree.Fixed = {}  # exe and environ of the job's processes, read once
        self._launcher: int | None = None
        # A stuck NVML read: its done-event and the reason reported while it stays stuck.
        self._nvml_stuck: tuple[threading.Event, str] | None = None
        self.last: Snapshot | None = None

    # -- discovery -------------------------------------------------------------------
    def discover(self) -> tuple[Job, list[Process]]:
        """Find the job's processes and name their roles and ranks."""
        root = self._launcher
        if root is None or not _same_start(root, self._launcher_started):
            if not _same_start(self.target, self._target_started):
                reused = _start_time(self.target) is not None
                raise ProcessNotFound(
                    f"PID {self.target} has exited" + (" and its PID now belongs to another "
                                                       "process" if reused else "") + ".")
            try:
                root = tree.find_root(self.target)
            except psutil.NoSuchProcess:
                raise ProcessNotFound(f"PID {self.target} has exited.") from None
            self._launcher = root
            self._launcher_started = _start_time(root)
        found = tree.walk(root, fixed=self._fixed)
        self._discovered = {info.pid: info for info in found}
        procs = []
        for info in found:
            role, rank = role_and_rank(info.cmdline, info.environ, info.pid == root,
                                       bool(info.children))
            env = info.environ or {}
            cmdline = (tuple(redact_argv(list(info.cmdline))) if self.options.redact
                       else info.cmdline)
            procs.append(Process(
                pid=info.pid, ppid=info.ppid, host=socket.gethostname(), role=role, rank=rank,
                title=title_of(cmdline), cmdline=cmdline, exe=info.exe,
                create_time=info.create_time, state=None, children=info.children,
                environ=redact_env(env) if self.options.redact else dict(env),
                python=_is_python(info),
            ))
        procs = _assign_spawn_order(procs)
        root_proc = next((p for p in procs if p.pid == root), None)
        args = launcher_args(root_proc.cmdline if root_proc else ())
        kind = job_kind([p.cmdline for p in procs])
        expected, source = expected_ranks(args, [p.environ for p in procs if p.role is Role.RANK],
                                          kind)
        job = Job(launcher=root if root_proc and root_proc.role is Role.LAUNCHER else None,
                  target=self.target, kind=kind, expected_ranks=expected,
                  expected_source=source, args=args)
        return job, procs

    # -- sampling --------------------------------------------------------------------
    def _dump(self, proc: Process, native: bool,
              nonblocking: bool | None = None) -> pyspy.DumpResult | None:
        if proc.python is False:
            return None
        skip = _not_sampleable(proc.pid)
        if skip is not None:  # py-spy would attach to a stopped process or a corpse
            return pyspy.DumpResult(proc.pid, error=skip[1], error_kind=skip[0])
        if nonblocking is None:
            nonblocking = self.options.nonblocking
        return pyspy.dump(proc.pid, native=native and not nonblocking,
                          timeout=self.options.timeout, nonblocking=nonblocking,
                          pyspy=self._pyspy)

    def _round(self, pool: ThreadPoolExecutor, procs: Sequence[Process], native: bool,
               fds: bool = False) -> dict[int, _Round]:
        def one(proc: Process) -> tuple[int, _Round]:
            # A PID checked before py-spy runs (never trace a stranger) and after (the rank
            # may have exited and its PID been handed out while py-spy ran).
            if _replaced(proc):
                self._known.pop(proc.pid, None)
                return proc.pid, _Round(None, procfs.ProcInfo(proc.pid, exists=False), True)
            sample = self._sample(proc, native, fds)
            if _replaced(proc):
                self._known.pop(proc.pid, None)
                return proc.pid, _Round(None, procfs.ProcInfo(proc.pid, exists=False), True)
            self._learn(proc, sample)
            return proc.pid, sample

        # Slowest first (a torch rank's native dump before the launcher's), so the last
        # core is not left with one long dump while the others idle.
        return dict(pool.map(one, sorted(procs, key=self._cost, reverse=True)))

    def snapshot(self) -> Snapshot:
        """Discover, sample over the window, analyze: one complete Snapshot."""
        started = self.clock()
        job, procs = self.discover()
        opts = self.options
        samples = max(1, opts.samples)
        interval = opts.window / (samples - 1) if samples > 1 else 0.0
        # CPU time from the /proc/PID/stat that discovery read, and from the last round's.
        cpu_before = {p.pid: _seconds(self._discovered[p.pid].cpu_ticks)
                      if p.pid in self._discovered else None for p in procs}
        self._known = {p.pid: k for p in procs if (k := self._known.get(p.pid)) is not None}
        gpu_readings = [self._read_gpus()]
        rounds: list[dict[int, _Round]] = []
        with ThreadPoolExecutor(max_workers=_workers(opts, len(procs))) as pool:
            # Facts of the whole host, read while the processes are sampled (the kernel takes
            # ~10 ms to list /proc/net/tcp*, however few sockets there are), on a thread of
            # their own so that no py-spy run waits for them.
            host_reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hangscope-host")
            listening_read = host_reads.submit(procfs.read_listening)
            kernel_read = host_reads.submit(
                kmsg.read_kernel_messages, [p.pid for p in procs],
                min((p.create_time for p in procs if p.create_time), default=None))
            _warm_analysis(host_reads)
            host_reads.shutdown(wait=False)
            t0 = self.clock()
            rounds.append(self._round(pool, procs, opts.native, fds=True))
            for i in range(1, samples):
                delay = t0 + i * interval - self.clock()
                if delay > 0:
                    time.sleep(delay)  # the sampling interval itself, not a readiness wait
                rounds.append(self._round(pool, procs, False))
                gpu_readings.append(self._read_gpus())
            window = self.clock() - t0
        cpu_after = {pid: _seconds(r.proc.cpu_ticks) for pid, r in rounds[-1].items()}
        listening = listening_read.result()
        reading = nvml.merge_readings(gpu_readings)
        merged = [self._merge(p, rounds, cpu_before, cpu_after, window, listening, reading)
                  for p in procs]
        merged = logs.attach_tails(merged, redact=opts.redact)
        snap = Snapshot(
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            hangscope=__version__,
            hosts=(replace(
                _host(reading),
                listening_ports=tuple(sorted({s.port for s in listening.values() if s.port})),
                kernel_messages=kernel_read.result()),),
            job=job,
            processes=tuple(merged),
            samples=samples,
            window_s=round(window, 3),
            duration_s=round(self.clock() - started, 3),
            redacted=opts.redact,
            notes=tuple(n for n in (reading.error,) if n),
        )
        snap = analyze(scrub(snap))  # no control characters from the target reach a terminal
        _raise_if_nothing_readable(snap)
        self.last = snap
        return snap

    def _read_gpus(self) -> nvml.GpuReading:
        """``nvml.read_gpus()``, bounded by ``--timeout``: a wedged driver can block NVML for
        minutes. While one read is stuck, later ones are not started."""
        if self._nvml_stuck is not None and not self._nvml_stuck[0].is_set():
            return nvml.GpuReading(error=self._nvml_stuck[1])
        done = threading.Event()
        result: list[nvml.GpuReading] = []

        def read() -> None:
            try:
                result.append(nvml.read_gpus())
            finally:
                done.set()

        threading.Thread(target=read, name="hangscope-nvml", daemon=True).start()
        if not done.wait(self.options.timeout):
            reason = (f"NVML did not answer within {self.options.timeout:g} s (the driver may "
                      "be wedged: does `nvidia-smi` hang too?)")
            self._nvml_stuck = (done, reason)
            return nvml.GpuReading(error=reason)
        self._nvml_stuck = None
        return result[0] if result else nvml.GpuReading(error="NVML read failed")

    # -- refresh economy --------------------------------------------------------------
    def _sample(self, proc: Process, native: bool, fds: bool) -> _Round:
        """One process's stacks and /proc facts for one round, paying as little as it can.

        1. None of its Python threads has run since a moment its stacks were known exactly
           (same scheduler counters, still asleep): those stacks, and py-spy is not run.
        2. Its stacks are known, or only Python stacks are wanted: a Python-only read that
           does not pause it (``--nonblocking``), exact when no Python thread ran during the
           read (counters before = after), else taken again with py-spy's own short pause.
           Same Python stacks, thread states and wchans as the known native dump: that dump.
        3. Otherwise (a cold start, or the stacks moved): ``py-spy dump --native``, at most
           one per core at a time.
        """
        pid = proc.pid
        with_fds = native or fds
        if proc.python is False:
            return _Round(None, procfs.read_process(pid, with_fds=with_fds))
        want_native = native and not self.options.nonblocking
        known = self._known.get(pid)
        if known is not None and (known.create_time != proc.create_time
                                  or (want_native and not known.dump.native)):
            known = None
        before = None
        if known is not None and known.marks is not None:
            before = procfs.read_tasks(pid)
            if known.marks.still(before):
                return _Round(known.dump, self._facts(pid, with_fds, before, known),
                              anchor=known.marks)
        if known is not None or not want_native:
            fresh, after, marks, at_dump = self._python_read(proc, before, known)
            if fresh is not None and fresh.ok and known is not None and _same_stacks(
                    fresh, at_dump, known):
                return _Round(known.dump, self._facts(pid, with_fds, after, known),
                              anchor=marks)
            if not want_native or fresh is None or not fresh.ok:
                return _Round(fresh, self._facts(pid, with_fds, after, known), anchor=marks,
                              at_dump=at_dump)
        with self._native_gate:
            at_dump = procfs.read_tasks(pid)
            dump = self._dump(proc, want_native)
        return _Round(dump, procfs.read_process(pid, with_fds=with_fds), at_dump=at_dump)

    def _python_read(self, proc: Process, before: tuple[procfs.TaskInfo, ...] | None,
                     known: _Known | None
                     ) -> tuple[pyspy.DumpResult | None, tuple[procfs.TaskInfo, ...],
                                _Marks | None, tuple[procfs.TaskInfo, ...]]:
        """Python stacks without pausing the process when that is exact: (dump, threads after
        it, marks if exact, threads as they were when the stacks were read)."""
        pid = proc.pid
        if before is None:
            before = procfs.read_tasks(pid, wchan=False)  # counters: did a thread run?
        python = set(known.keys) if known is not None else {t.tid for t in before}
        quiet = all(t.state in _ASLEEP and t.sched is not None
                    for t in before if t.tid in python)
        if quiet or self.options.nonblocking:
            fresh = self._dump(proc, native=False, nonblocking=True)
            after = procfs.read_tasks(pid)
            if fresh is None or not fresh.ok:
                return fresh, after, None, after
            marks = _Marks.between(before, after, {t.tid for t in fresh.threads})
            if marks is not None or self.options.nonblocking:
                return fresh, after, marks, after
        # A Python thread ran: the unpaused read may be torn, so pause (py-spy's own pause).
        # Thread states are read before it: after it, the threads are resuming from the stop.
        at_dump = procfs.read_tasks(pid)
        fresh = self._dump(proc, native=False, nonblocking=False)
        return fresh, procfs.read_tasks(pid), None, at_dump

    def _learn(self, proc: Process, sample: _Round) -> None:
        """Remember what a round saw of one process, for the next round or refresh."""
        dump = sample.dump
        if dump is None or not dump.ok:
            self._known.pop(proc.pid, None)
            return
        known = self._known.get(proc.pid)
        if known is not None and known.dump is dump:
            known.marks = sample.anchor
            known.info = sample.proc
            return
        keys = {t.tid: _stack_key(t) for t in dump.threads}
        tasks = sample.at_dump if sample.at_dump is not None else sample.proc.tasks
        self._known[proc.pid] = _Known(
            create_time=proc.create_time, dump=dump, keys=keys,
            states={t.tid: (t.state, t.wchan) for t in tasks if t.tid in keys},
            marks=sample.anchor, info=sample.proc)

    @staticmethod
    def _facts(pid: int, with_fds: bool, tasks: tuple[procfs.TaskInfo, ...],
               known: _Known | None) -> procfs.ProcInfo:
        """``read_process``, keeping the last round's open files when no thread of the process
        has run since (only its own threads change its fd table): a rank holds ~100 fds."""
        prev = known.info if known is not None else None
        if not with_fds or prev is None or prev.num_fds is None or not _all_still(prev.tasks,
                                                                                   tasks):
            return procfs.read_process(pid, with_fds, tasks)
        return replace(procfs.read_process(pid, False, tasks), fds=prev.fds,
                       num_fds=prev.num_fds, fd_targets=prev.fd_targets,
                       log_files=prev.log_files, socket_inodes=prev.socket_inodes,
                       permission_denied=prev.permission_denied)

    def _cost(self, proc: Process) -> float:
        """What sampling ``proc`` is expected to cost, to start the slowest first."""
        known = self._known.get(proc.pid)
        if known is not None and known.dump.native:
            return known.dump.seconds
        found = self._discovered.get(proc.pid)
        # Native dumps cost by the size of what is mapped (libtorch: ~0.5 s per rank).
        return (found.vsize or 0) / 2**40 if found is not None and proc.python else 0.0

    # -- merging ----------------------------------------------------------------------
    def _merge(self, proc: Process, rounds: list[dict[int, _Round]],
               cpu_before: dict[int, float | None], cpu_after: dict[int, float | None],
               window: float, listening: dict, reading: nvml.GpuReading) -> Process:
        first = rounds[0][proc.pid]
        last = rounds[-1][proc.pid]
        info = last.proc if last.proc.exists else first.proc
        errors: list[str] = []
        reused = any(r[proc.pid].reused for r in rounds)
        if reused:
            errors.append(f"the process exited during sampling and its PID {proc.pid} was "
                          "reused by another process (a later start time): that one was not "
                          "reported")
        elif not last.proc.exists:
            errors.append("the process exited during sampling")
        dumps = [r[proc.pid].dump for r in rounds]
        base = next((d for d in dumps if d is not None and d.ok), None)
        for dump in dumps:
            if dump is None or dump.ok:
                continue
            message = dump.error or "py-spy failed"
            if base is not None:
                # Another round read the stacks: say what this one lost, not that all failed.
                lost = "native" if dump.native else "one"
                kept = ("Python-only stacks shown" if dump.native and not base.native
                        else "other samples used")
                message = f"{lost} sample failed ({message}); {kept}"
            if message not in errors:
                errors.append(message)
        if proc.python is False:
            errors.append("not a Python process: /proc facts only")
        # How long each thread's Python stack stayed the same, from the last round back.
        unchanged: dict[int, int] = {}
        seen: dict[int, int] = {}
        last_key: dict[int, tuple] = {}
        for dump in dumps:
            if dump is None or not dump.ok:
                continue
            for thread in dump.threads:
                key = _stack_key(thread)
                seen[thread.tid] = seen.get(thread.tid, 0) + 1
                if last_key.get(thread.tid) == key:
                    unchanged[thread.tid] = unchanged.get(thread.tid, 1) + 1
                else:
                    unchanged[thread.tid] = 1
                last_key[thread.tid] = key
        tasks = {t.tid: t for t in info.tasks}
        threads: list[Thread] = []
        base_threads = base.threads if base else ()
        for pt in base_threads:
            task = tasks.pop(pt.tid, None)
            name = pt.name or (task.comm if task else None)
            threads.append(Thread(
                tid=pt.tid, name=redact_text(name) if name and self.options.redact else name,
                state=task.state if task else None, wchan=task.wchan if task else None,
                active=pt.active, owns_gil=pt.owns_gil, frames=pt.frames, python=True,
                unchanged_samples=unchanged.get(pt.tid, 1), samples=seen.get(pt.tid, 1)))
        for task in tasks.values():  # threads without Python: their comm is the target's text
            comm = redact_text(task.comm) if task.comm and self.options.redact else task.comm
            threads.append(Thread(tid=task.tid, name=comm, state=task.state,
                                  wchan=task.wchan, python=False))
        state = info.state if info.exists and last.proc.exists else "gone"
        cpu = None
        before, after = cpu_before.get(proc.pid), cpu_after.get(proc.pid)
        if before is not None and after is not None and window > 0 and not reused:
            cpu = round(100.0 * (after - before) / window, 1)
        # Sockets are listed in round one (fds are read once): a listener is not lost later.
        inodes = first.proc.socket_inodes | info.socket_inodes
        socks = tuple(listening[i] for i in sorted(inodes) if i in listening)
        faults = (last.proc.major_faults - first.proc.major_faults
                  if last.proc.major_faults is not None and first.proc.major_faults is not None
                  else None)
        if info.permission_denied:
            errors.append("permission denied reading /proc/PID/fd")
        return replace(
            proc, state=state, ppid=info.ppid if info.ppid is not None else proc.ppid,
            cpu_percent=cpu, rss=info.rss, vms=info.vms, swap=info.swap,
            major_faults=info.major_faults, num_threads=info.threads, num_fds=first.proc.num_fds,
            fds=first.proc.fds, log_files=first.proc.log_files, listening=socks,
            threads=tuple(threads), native_sampled=bool(base and base.native),
            gpus=nvml.gpus_of_process(
                proc.pid, proc.environ, reading,
                first.proc.fd_targets if first.proc.num_fds is not None else None),
            kernel_stack=info.kernel_stack, errors=tuple(errors),
            major_faults_window=faults,
            exit_code=exitcode.read_exit_code(proc.pid) if state in ("Z", "X") else None,
            python=proc.python if base is None else True,
        )


_analysis_warm = False


def _warm_analysis(pool: ThreadPoolExecutor) -> None:
    """Import the analysis (~50 ms of imports and regexes) while the first dumps run."""
    global _analysis_warm
    if not _analysis_warm:
        _analysis_warm = True
        pool.submit(_import_analysis)


def _import_analysis() -> None:
    import hangscope.analyze.classify
    import hangscope.analyze.findings
    import hangscope.analyze.group
    import hangscope.analyze.verdict  # noqa: F401


def _all_still(was: Sequence[procfs.TaskInfo], now: Sequence[procfs.TaskInfo]) -> bool:
    """Whether no thread at all ran between two reads (every one asleep, same counters)."""
    if len(was) != len(now):
        return False
    return all(a.tid == b.tid and a.state == b.state and a.state in _ASLEEP
               and a.sched is not None and a.sched == b.sched for a, b in zip(was, now,
                                                                              strict=True))


def _same_stacks(fresh: pyspy.DumpResult, tasks: Sequence[procfs.TaskInfo],
                 known: _Known) -> bool:
    """Same Python stacks, thread states and wchans as the known dump: keep its native stacks."""
    if {t.tid: _stack_key(t) for t in fresh.threads} != known.keys:
        return False
    return {t.tid: (t.state, t.wchan) for t in tasks if t.tid in known.keys} == known.states


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _seconds(ticks: int | None) -> float | None:
    return None if ticks is None else ticks / _CLOCK_TICKS


def _is_python(info: tree.Found) -> bool | None:
    from hangscope.analyze.roles import looks_like_python

    if looks_like_python(info.cmdline):
        return True
    exe = (info.exe or "").rsplit("/", 1)[-1]
    if exe.startswith("python"):
        return True
    if info.exe is None and not info.cmdline:
        return None
    return False


_boot: tuple[float, float] = (-1.0, 0.0)  # (monotonic time read, psutil.boot_time())


def _stat(pid: int) -> tuple[str, float] | None:
    """(state letter, psutil's create_time()) from one read of /proc/PID/stat; None: gone.

    These checks run for every process before and after every py-spy run: a psutil.Process
    costs ten times this read."""
    global _boot
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            rest = fh.read().rsplit(b")", 1)[-1].split()
        state, start = rest[0].decode(), int(rest[19])
    except (OSError, IndexError, ValueError):
        return None
    now = time.monotonic()
    if now - _boot[0] > 1.0:  # boot time moves only when the wall clock is stepped
        _boot = (now, psutil.boot_time())
    return state, float(start) / _CLOCK_TICKS + _boot[1]


def _start_time(pid: int) -> float | None:
    found = _stat(pid)
    return None if found is None else found[1]


def _same_start(pid: int, started: float | None) -> bool:
    """Whether ``pid`` is alive and is still the process that started at ``started``."""
    now = _start_time(pid)
    return now is not None and (started is None or abs(now - started) <= 0.01)


def _replaced(proc: Process) -> bool:
    """Whether ``proc``'s PID now names another process: its start time is not the one seen."""
    if proc.create_time is None:
        return False
    started = _start_time(proc.pid)  # None: gone or unreadable, reported as such elsewhere
    return started is not None and abs(started - proc.create_time) > 0.01


def _not_sampleable(pid: int) -> tuple[str, str] | None:
    """(kind, reason) for a process py-spy must not touch: stopped, traced, or a zombie."""
    found = _stat(pid)
    if found is None:
        return None  # py-spy reports what is wrong
    status = found[0]  # psutil.status()'s letter: T stopped, t tracing stop, Z zombie, X dead
    if status == "T":
        return "stopped", (f"stopped (state T: SIGSTOP, Ctrl-Z or a debugger): not sampled, and "
                           f"left stopped; `kill -CONT {pid}` resumes it")
    if status == "t":
        return "stopped", ("held by a debugger or another tracer (state t): not sampled, "
                           "and left as it is")
    if status in ("Z", "X", "x"):
        return "gone", ("a zombie: it has exited and its parent has not reaped it; "
                        "no stacks to sample")
    return None


def _host(reading: nvml.GpuReading) -> Host:
    mem = procfs.meminfo()
    swap_total, swap_free = mem.get("SwapTotal"), mem.get("SwapFree")
    return Host(
        name=socket.gethostname(),
        kernel=platform.release(),
        cpus=os.cpu_count(),
        mem_total=mem.get("MemTotal"),
        mem_available=mem.get("MemAvailable"),
        swap_used=(swap_total - swap_free) if swap_total is not None and swap_free is not None
        else None,
        cgroup_memory_limit=procfs.cgroup_memory_limit(),
        gpus=reading.gpus,
        gpu_error=reading.error,
    )


def _raise_if_nothing_readable(snap: Snapshot) -> None:
    """Every Python process refused py-spy for lack of privilege: say how to fix it."""
    python = [p for p in snap.processes if p.python]
    if python and all(any("permission" in e.lower() or "not permitted" in e.lower()
                          for e in p.errors) and not any(t.python for t in p.threads)
                      for p in python):
        err = PermissionDenied(
            f"Not allowed to read the stacks of PID {snap.job.target} "
            f"({len(python)} Python process(es) refused py-spy).")
        err.snapshot = snap  # type: ignore[attr-defined]
        raise err


def sample_once(pid: int, options: SampleOptions | None = None) -> Snapshot:
    """One complete snapshot of the job that ``pid`` belongs to."""
    return Sampler(pid, options).snapshot()
