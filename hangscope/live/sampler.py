"""Discover a job and sample every process in parallel over a short window: raw Snapshots.

The sampler is the pipeline's only stage with side effects: it runs the collectors, several
rounds over ``window`` seconds, then hands detached data to ``hangscope.analyze``. It records
and never judges: NCCL RAS's answer, the Flight Recorder dumps and the progress window go on
``Snapshot.readings`` as read, and ``analyze`` draws every conclusion from them.
Round one takes native stacks (slow: py-spy reads libtorch's symbols); later rounds are
Python-only (milliseconds) and only tell stuck (same stack) from slow (stack moved).

Why one file: one snapshot's steps (discovery, rounds, the progress window, the reads on the
host thread, the verdict of a report without stacks) share the Sampler's state of that snapshot.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import psutil

from hangscope import __version__, phases
from hangscope.analyze.evidence.roles import is_helper_role
from hangscope.collect import procfs, pyspy, tree
from hangscope.collect.host import BoundedGpuReader
from hangscope.errors import PermissionDenied, ToolMissing
from hangscope.frameworks import does_work
from hangscope.live import settle
from hangscope.live.discover import Discovery, check_python_job, not_sampleable, replaced
from hangscope.live.newcomers import newcomers, since_boot
from hangscope.live.refresh import Refresher
from hangscope.live.rounds import Round, stack_key
from hangscope.model import Job, Process, Readings, Role, Severity, Snapshot, Verdict, VerdictKind

if TYPE_CHECKING:
    from hangscope.collect import nvml
    from hangscope.collect.progress import ProgressWatcher
    from hangscope.model.progress import ProgressEvidence

# What runs only after the first round (the later rounds, the waits, the analysis, the reading of
# collectives) is imported then, on the host thread while the first py-spy dumps run
# (_warm_imports): a cold dump's first py-spy starts ~0.1 s sooner (issue 22).

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
    # Ask each rank for a Flight Recorder dump through its debug-info pipe (the first snapshot
    # of a Sampler only; ``--no-fr-trigger`` turns it off): this makes the job write files.
    fr_trigger: bool = True
    # Watch progress over the window (collect/progress.py): dense py-spy record, per-thread
    # counters, GPM; ``--no-progress`` turns it off (stuck/moved from the stack samples alone).
    progress: bool = True
    # Name the kernel on each stuck rank whose GPU spins (``--kernels``): cuda-gdb pauses each
    # such rank for seconds, so only on request, with a deadline per rank.
    kernels: bool = False
    kernels_timeout: float = 30.0
    # End the first snapshot's window early where the job's silence before it already covers
    # it (live/settle.py); ``--whole-window`` turns it off.
    settle: bool = True


#: The shortest window worth watching for progress (a step of a healthy job is longer).
MIN_WATCH_S = 0.5
#: The shortest window that runs beside the first round's native dumps (a dump's pause is a
#: small part of it); a shorter one starts when the first round is in.
BESIDE_WINDOW_S = 1.5
#: How long the one read of a process in state D may take (it is not stopped: memory reads).
D_STATE_DEADLINE_S = 1.0


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
        # Without py-spy the report is /proc facts only, and says so (as when py-spy is refused):
        # states, wait channels, CPU and sockets still tell a lot about a hang.
        self._pyspy: str | None
        self._pyspy_missing: ToolMissing | None = None
        try:
            self._pyspy = pyspy.find_pyspy()
        except ToolMissing as exc:
            self._pyspy, self._pyspy_missing = None, exc
        tree.check_target(pid)
        # Start times tell a live process from a later one that got its PID (long `attach`).
        self.discovery = Discovery(pid, redact=self.options.redact)
        # `hangscope dump $$`, `sleep`: refused now. The first snapshot, an instant later,
        # uses this discovery instead of walking /proc again (~25 ms of a cold dump).
        self._found: tuple[Job, list[Process]] | None = self.discover()
        self._found_at = clock()
        check_python_job(pid, self._found[1])
        # What the last sample of each process learnt, to skip py-spy when nothing changed.
        self._refresh = Refresher(self._dump, _native_slots(self.options),
                                  self.options.nonblocking)
        self._gpus = BoundedGpuReader(self.options.timeout)
        self._pyspy_version: str | None = None  # read once, with the first snapshot
        # Processes found in state D this snapshot: read once (see _uninterruptible).
        self._in_d: dict[int, pyspy.DumpResult] = {}
        self._fr_asked = False  # a live view triggers the Flight Recorder once, not per tick
        self._watcher: ProgressWatcher | None = None  # this snapshot's, while it samples
        self.last: Snapshot | None = None
        self._kernels_once = False  # the TUI's kernels key: the next snapshot reads kernels
        self._tracers: set[int] = set()  # this snapshot's tracers of job processes
        # Processes that computed as round one began: read without pausing them (_sample);
        # those still to be looked at again by the next round.
        self._unpaused: set[int] = set()
        self._to_check: set[int] = set()
        self._defer_native = False
        # The window's evidence where the first round outlasted it: the later rounds read no
        # stack of a process it saw progress, the last one too (after the watcher stopped)
        self._late_window: ProgressEvidence | None = None
        self._late = False
        # the window's evidence and the processes it saw progress, decided once
        self._progressing: tuple[ProgressEvidence, frozenset[int]] | None = None

    def request_kernels(self) -> None:
        """Read the stuck spinning ranks' kernels in the next snapshot only (cuda-gdb)."""
        self._kernels_once = True

    def discover(self) -> tuple[Job, list[Process]]:
        """Find the job's processes and name their roles and ranks (hangscope.live.discover)."""
        return self.discovery.discover()

    def _read_pyspy_version(self) -> str | None:
        """``py-spy --version`` for the notes: which reader took these stacks."""
        if self._pyspy_version is None:
            self._pyspy_version = pyspy.version(self._pyspy)
        return self._pyspy_version

    # -- sampling --------------------------------------------------------------------
    def _dump(self, proc: Process, native: bool,
              nonblocking: bool | None = None) -> pyspy.DumpResult | None:
        if proc.python is False:
            return None
        stat = procfs.read_stat(proc.pid)
        skip = not_sampleable(proc.pid, stat)
        if skip is not None:  # py-spy would attach to a stopped process or a corpse
            return pyspy.DumpResult(proc.pid, error=skip[1], error_kind=skip[0])
        if stat is not None and stat.state == "D":
            return self._uninterruptible(proc)
        if self._pyspy_missing is not None:
            return pyspy.DumpResult(proc.pid, error=f"not sampled: {self._pyspy_missing}",
                                    error_kind="missing")
        if nonblocking is None:
            nonblocking = self.options.nonblocking
        if proc.pid in self._tracers:
            nonblocking = True
        watcher = self._watcher
        # a ptrace stop wakes every thread: not progress (and the window never ends mid-stop)
        with (watcher.pausing(proc.pid) if not nonblocking and watcher is not None
              else contextlib.nullcontext()):
            return pyspy.dump(proc.pid, native=native and not nonblocking,
                              timeout=self.options.timeout, nonblocking=nonblocking,
                              pyspy=self._pyspy)

    def _uninterruptible(self, proc: Process) -> pyspy.DumpResult:
        """A process in state D: ptrace cannot stop it until it leaves the kernel, so a
        stopping py-spy would wait out --timeout in every round. One short read that does not
        stop it, reused for the rest of the snapshot; /proc gives its kernel stack and wchan."""
        if proc.pid not in self._in_d:
            read = pyspy.dump(proc.pid, native=False, nonblocking=True, pyspy=self._pyspy,
                              timeout=min(self.options.timeout, D_STATE_DEADLINE_S))
            if not read.ok:
                read = replace(read, error=f"in uninterruptible sleep (state D), read once "
                               f"without stopping it: {read.error}; its kernel stack and wait "
                               "channel are from /proc")
            self._in_d[proc.pid] = read
        return self._in_d[proc.pid]

    def _computes(self, proc: Process) -> bool:
        """Cheap kernel facts, before any py-spy: a thread of ``proc`` is on a CPU now, or its
        CPU time moved by two clock ticks or more since discovery read it
        (``/proc/PID/task/*/stat``, ``/proc/PID/stat``): one tick is a helper's wake-up that
        the tick happened to catch, not a process at work."""
        if proc.python is False or proc.pid in self._tracers:
            return False
        if any(t.state == "R" for t in procfs.read_tasks(proc.pid, wchan=False)):
            return True
        found = self.discovery.found.get(proc.pid)
        stat = procfs.read_stat(proc.pid)
        return (found is not None and found.cpu_ticks is not None and stat is not None
                and stat.state not in ("D", "T", "t", "Z", "X")
                and stat.cpu_ticks >= found.cpu_ticks + COMPUTE_TICKS)

    def _sample(self, proc: Process, native: bool, fds: bool,
                previous: dict[int, Round] | None) -> Round:
        """One process's round, paying for what is stuck (issue 36).

        Round one of a windowed dump reads a process that computes (``_computes``) without
        pausing it, Python only. The next round reads it again the same way: where a Python
        thread stayed in one function on a CPU (``_stayed``: a spin-wait such as a CUDA
        sync, or a long native call), or its main thread stayed blocked where it was, the
        native stacks are taken then (they name the wait); otherwise it is never paused,
        and its counters judge it (the progress window). A later round reads no stack at all
        of a process the window, already over, saw progress (``_progressed``).
        """
        pid = proc.pid
        if previous is not None and self._progressed(pid):
            # A later round, after a first round that outlasted the window: the window saw
            # this process progress, which no stack of it can change. Its /proc facts only;
            # no py-spy (on a machine a busy engine holds, each read waits seconds for a core).
            return Round(None, procfs.read_process(pid, with_fds=fds))
        if native and self._defer_native and self._computes(proc):
            self._unpaused.add(pid)
            self._to_check.add(pid)
            return self._refresh.sample(proc, False, fds, unpaused=True)
        if pid not in self._unpaused:
            return self._refresh.sample(proc, native, fds)
        fresh = self._refresh.sample(proc, False, fds, unpaused=True)
        if pid not in self._to_check:
            return fresh
        self._to_check.discard(pid)
        reads = [previous.get(pid) if previous else None, fresh]
        # A thread caught twice in one function may be in a loop that calls it often: look
        # again, a little later each time (an unpaused read costs ~15 ms of py-spy, a native
        # one a pause and ~0.1-0.5 s of a core).
        for _ in range(EXTRA_LOOKS):
            if not _stayed(reads, pid):
                return reads[-1]
            time.sleep(LOOK_INTERVAL_S)  # the spacing of the looks, not a readiness wait
            reads.append(self._refresh.sample(proc, False, fds, unpaused=True))
        if not _stayed(reads, pid) or self._progressed(pid):
            return reads[-1]
        self._unpaused.discard(pid)
        return self._refresh.sample(proc, True, fds)

    def _progressed(self, pid: int) -> bool:
        """The window, already over (a first round that outlasted it), saw ``pid`` progress:
        it is neither paused for native stacks, which would name no wait, nor read again (on
        a machine the job's threads hold, a native dump of a busy process takes seconds and
        an unpaused one waits for a core as long)."""
        ended = self._watcher.ended if self._watcher is not None else self._late_window
        if ended is None:
            return False
        decided = self._progressing
        if decided is None or decided[0] is not ended:  # once per window, not per round
            from hangscope.analyze.evidence.progress import PROGRESSING, decide
            decided = self._progressing = (ended, frozenset(
                p.pid for p in ended.processes
                if decide(p, ended.seconds).decision == PROGRESSING))
        return pid in decided[1]

    def _round(self, pool: ThreadPoolExecutor, procs: Sequence[Process], native: bool,
               fds: bool = False, off_cpu: dict[int, dict[int, float]] | None = None,
               previous: dict[int, Round] | None = None,
               calls: dict[int, dict[int, float]] | None = None) -> dict[int, Round]:
        def one(proc: Process) -> tuple[int, Round]:
            if off_cpu is not None:  # each process's own before its sample (one key each)
                off_cpu[proc.pid] = procfs.read_off_cpu(proc.pid)
            if calls is not None:  # before the pause: a timed wait it ends resumes untimed
                # each wait's end, its deadline read now: a thread whose timed wait ends
                # waits again with a new deadline where the old one was
                calls[proc.pid] = settle.wait_ends(
                    proc.pid, procfs.read_syscalls(proc.pid),
                    off_cpu.get(proc.pid, {}) if off_cpu is not None else {})
            # A PID checked before py-spy runs (never trace a stranger) and after (the rank
            # may have exited and its PID been handed out while py-spy ran).
            if replaced(proc):
                self._refresh.forget(proc.pid)
                return proc.pid, Round(None, procfs.ProcInfo(proc.pid, exists=False), True)
            sample = self._sample(proc, native, fds, previous)
            if replaced(proc):
                self._refresh.forget(proc.pid)
                return proc.pid, Round(None, procfs.ProcInfo(proc.pid, exists=False), True)
            self._refresh.learn(proc, sample)
            return proc.pid, sample

        # Slowest first (a torch rank's native dump before the launcher's), so the last
        # core is not left with one long dump while the others idle.
        return dict(pool.map(one, sorted(procs, key=self._cost, reverse=True)))

    def snapshot(self) -> Snapshot:
        """Discover, sample over the window, analyze: one complete Snapshot."""
        try:
            return self._snapshot()
        finally:  # never leave a recorder running, whatever failed
            if self._watcher is not None:
                self._watcher.stop()
                self._watcher = None

    def _snapshot(self) -> Snapshot:
        started = self.clock()
        found, self._found = self._found, None
        fresh = found is not None and started - self._found_at < 1.0  # not a TUI's later tick
        # (the wall time discovery listed the job at: a child born since is a newcomer)
        listed = since_boot() - (started - self._found_at if found is not None and fresh else 0)
        job, procs = found if found is not None and fresh else self.discover()
        phases.mark("discover")
        opts = self.options
        samples = max(1, opts.samples)
        interval = opts.window / (samples - 1) if samples > 1 else 0.0
        # CPU time from the /proc/PID/stat that discovery read, and from the last round's.
        found = self.discovery.found
        cpu_before = {p.pid: _seconds(found[p.pid].cpu_ticks) if p.pid in found else None
                      for p in procs}
        self._refresh.keep([p.pid for p in procs])
        self._in_d = {}
        # Processes that hold another of the job in a ptrace stop (a debugger, a native
        # sampler): py-spy's own ptrace stop of one interrupts the call it blocks in (a write
        # to a full pipe returns early), which can end the very hang being read; they are read
        # without pausing. Only a tracee in its stop is asked (discovery read its state): one
        # that runs can drain what its tracer waits on.
        found = self.discovery.found
        self._tracers = {t for p in procs if (f := found.get(p.pid)) is not None
                         and f.status == psutil.STATUS_TRACING_STOP
                         and (t := procfs.tracer_of(p.pid)) is not None}
        job_started = min((p.create_time for p in procs if p.create_time), default=None)
        # Only a windowed dump's first snapshot can defer a native dump to its next round.
        self._unpaused, self._to_check = set(), set()
        self._defer_native = (opts.native and not opts.nonblocking and samples > 1
                              and self.last is None)
        rounds: list[dict[int, Round]] = []
        with ThreadPoolExecutor(max_workers=_workers(opts, len(procs))) as pool:
            # Facts of the whole host, read while the processes are sampled (the kernel takes
            # ~10 ms to list /proc/net/tcp*, however few sockets there are), on a thread of
            # their own so that no py-spy run waits for them.
            host_reads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hangscope-host")
            # The GPUs at the window's start, read beside the first round: NVML's set-up
            # costs a cold dump tens of milliseconds on a GPU node (issue 22).
            first_gpus = host_reads.submit(self._gpus.read)
            listening_read = host_reads.submit(procfs.read_listening)
            kernel_read = host_reads.submit(  # (lines, a note when the log is unreadable)
                _read_kernel_log, [p.pid for p in procs], job_started)
            version_read = host_reads.submit(self._read_pyspy_version)
            _warm_imports(host_reads)
            host_reads.shutdown(wait=False)
            # How long each thread has been off CPU, read in the first round right before
            # py-spy touches its process (its pause wakes every thread), not in a pass over
            # every process first: a stack that stays put over the window was already stuck
            # that long before it.
            off_cpu: dict[int, dict[int, float]] = {}
            beside = opts.window >= BESIDE_WINDOW_S
            # The syscalls the threads block in, beside their times off CPU, where the window
            # may end early (settle.py): a first snapshot's default window, watched beside it.
            calls: dict[int, dict[int, float]] | None = (
                {} if opts.settle and beside and self.last is None and samples > 1
                and not opts.nonblocking and not settle.gpu_devices() else None)
            # A window of a few seconds runs beside the first round: progress is watched
            # (counters, dense Python sampling that pauses nobody, GPM) while the native dumps
            # run, so a dump costs the longer of the two, not their sum (issue 36). The
            # watcher's counters are read before any dump pauses a process, so each pause it
            # is told of (pausing) is one it saw; a dense sample taken while a process is
            # paused reads the same stack as the one before it: no move. A short window
            # follows the first round instead: a process held stopped by its native dump for
            # much of it would show too little of its own activity (a 0.2 s poll seen
            # waking not once in 0.5 s reads "paused").
            if beside:
                self._start_window(procs)
            t0 = self.clock()
            rounds.append(self._round(pool, procs, opts.native, fds=True, off_cpu=off_cpu,
                                      calls=calls))
            self._late = beside and self.clock() - t0 >= opts.window
            phases.mark("first round (py-spy)")
            gpu_readings = [first_gpus.result()]
            from hangscope.collect import collectives  # warm by now (_warm_imports)
            # NCCL RAS and the Flight Recorder, while the later rounds sample (own deadlines).
            coll_read = collectives.start(
                procs, {pid: r.proc for pid, r in rounds[0].items()}, listening_read.result(),
                job_started, opts.fr_trigger and not self._fr_asked)
            self._fr_asked = True
            # The later rounds keep their places in the window asked for (--window); where
            # the first round took longer, they follow it at once and the window measured
            # (and reported) is that much longer.
            if not beside:
                self._start_window(procs)
                t0 = self.clock()
            settled = None
            if calls is not None and not self._late:
                settled = self._settled(t0, rounds[0], off_cpu, calls, gpu_readings[0])
                if settled is not None:  # the later rounds follow at once
                    interval = (settled - t0) / (samples - 1)
            window, evidence = 0.0, None
            for i in range(1, samples):
                delay = t0 + i * interval - self.clock()
                if delay > 0:
                    time.sleep(delay)  # the sampling interval itself, not a readiness wait
                if i == samples - 1:  # the window ends as the last round starts
                    window, evidence = self.clock() - t0, self._stop_watcher()
                rounds.append(self._round(pool, procs, False, previous=rounds[-1]))
                gpu_readings.append(self._gpus.read())
            if samples == 1:
                evidence = self._stop_watcher()
        if evidence is not None:  # what the job started while it was watched
            evidence = replace(evidence, newcomers=newcomers(procs, listed, opts.redact))
        phases.mark("window")
        from hangscope.analyze.evidence.locals_wanted import interpreter, locals_wanted
        from hangscope.collect import exitcode, logs, nvml
        from hangscope.collect.host import read_host
        from hangscope.collect.procfs import read_memory
        from hangscope.collect.source import line_text
        from hangscope.collect.waits import read_waits
        from hangscope.live.rounds import Window, merge_rounds
        cpu_after = {pid: _seconds(r.proc.cpu_ticks) for pid, r in rounds[-1].items()}
        if samples > 1:  # CPU over the window: from the first round's read, as the window
            cpu_before = {pid: _seconds(r.proc.cpu_ticks) if r.proc.exists else cpu_before[pid]
                          for pid, r in rounds[0].items()}
        listening = listening_read.result()
        reading = nvml.merge_readings(gpu_readings)
        read = Window(seconds=window, cpu_before=cpu_before, cpu_after=cpu_after,
                      listening=listening, gpus=reading, exit_codes={
                          pid: exitcode.read_exit_code(pid) for pid, r in rounds[-1].items()
                          if r.proc.exists and r.proc.state in ("Z", "X")},
                      off_cpu=off_cpu)
        merged = [merge_rounds(p, rounds, read, opts.redact) for p in procs]
        merged = logs.attach_tails(merged, redact=opts.redact)
        asked, tids, ops = locals_wanted(merged) if not opts.nonblocking else ((), {}, {})
        waits = read_waits(merged, asked, interpreter(tids, ops, line_text, read_memory),
                           min(5.0, opts.timeout), self._pyspy)
        phases.mark("locals and waits")
        host_name = merged[0].host if merged else None
        from hangscope.analyze import analyze
        from hangscope.live.kernels import with_kernels
        from hangscope.model.serialize import scrub
        ras, flight_recorder = collectives.finish(coll_read)
        readings = Readings(host=host_name, ras=replace(ras, raw=None),
                            flight_recorder=flight_recorder,
                            progress=_redacted(evidence) if opts.redact else evidence)
        snap = Snapshot(
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            hangscope=__version__,
            hosts=(replace(
                read_host(reading),
                listening_ports=tuple(sorted({s.port for s in listening.values() if s.port})),
                kernel_messages=kernel_read.result()[0]),),
            job=job,
            processes=tuple(merged),
            samples=samples,
            window_s=round(window, 3),
            duration_s=round(self.clock() - started, 3),
            redacted=opts.redact,
            notes=tuple(n for n in (reading.error, kernel_read.result()[1],
                                    version_read.result(), settled and _settled_note(
                                        window, opts.window)) if n),
            waits=waits,
            readings=(readings,),
        )
        # No control characters from the target reach a terminal; the analysis judges the
        # readings (collectives, progress) and adds their notes after these.
        raw = scrub(snap)
        snap = analyze(raw)
        phases.mark("analysis")
        if opts.kernels or self._kernels_once:
            self._kernels_once = False
            snap = with_kernels(snap, raw, analyze, opts.kernels_timeout)
        python = sum(1 for p in procs if p.python)
        if self._pyspy_missing is not None:
            snap = replace(snap, verdict=_no_stacks(
                f"No stack could be read: {self._pyspy_missing.message.rstrip('.')}.",
                (f"fix: {self._pyspy_missing.help_text}",)))
            raise ToolMissing(self._pyspy_missing.message, self._pyspy_missing.help_text,
                              snapshot=snap)
        if _refused(rounds, procs):
            snap = replace(snap, verdict=_no_stacks(
                f"No stack could be read: {_pids(python)} refused py-spy (tracing needs root "
                "or CAP_SYS_PTRACE).", ptrace_fixes(job.target)))
            raise PermissionDenied(
                f"Not allowed to read the stacks of PID {job.target} "
                f"({python} Python process(es) refused py-spy).", snapshot=snap)
        self.last = snap
        return snap

    def _settled(self, t0: float, first: dict[int, Round], off_cpu: dict[int, dict[int, float]],
                 calls: dict[int, dict[int, float]],
                 gpus: nvml.GpuReading) -> float | None:
        """When the window ends, where the silence before it covers it (``settle``): every
        watched process's Python threads had been off CPU for the whole window asked for, each
        in a wait no deadline ends within it, and none of those processes moved in the window's
        first :data:`~settle.SETTLE_MIN_S` (or its first round, if longer). None: it runs on."""
        watcher = self._watcher
        if watcher is None or settle.on_gpu_host(
                len(gpus.gpus), [t for r in first.values() for t in r.proc.fd_targets]):
            return None
        window = self.options.window
        if not all(settle.silent_before(pid, first[pid].dump if pid in first else None,
                                        off_cpu.get(pid, {}), calls.get(pid, {}), window)
                   for pid in watcher.pids):
            return None
        delay = t0 + settle.SETTLE_MIN_S - self.clock()
        if delay > 0:
            time.sleep(delay)  # the least of the window watched, not a readiness wait
        if not all(watcher.still(pid, settle.HELPERS_CPU_SHARE) for pid in watcher.pids):
            return None
        return self.clock()

    def _stop_watcher(self) -> ProgressEvidence | None:
        watcher, self._watcher = self._watcher, None
        evidence = watcher.stop() if watcher is not None else None
        self._late_window = evidence if self._late else None
        return evidence

    def _start_window(self, procs: Sequence[Process]) -> None:
        """The progress watcher over the ranks (or main) that run Python, helpers left out,
        ending by itself when the window asked for is over: a first round that outlasts it
        (a machine the job's threads hold) does not stretch it.

        A live view's later refreshes read counters and GPM only: py-spy record costs a
        recorder per rank per tick (docs/performance.md).
        """
        opts = self.options
        self._late_window, self._late = None, False
        if not opts.progress or opts.samples < 2 or opts.window < MIN_WATCH_S:
            return  # no window to watch: a single round is over in milliseconds
        watched = watched_pids(procs)
        if not watched:
            return
        # the window may stretch by a --timeout per round; past that, the recorders stop alone
        cap = opts.window + opts.samples * opts.timeout + 30
        record = self.last is None and self._pyspy is not None
        from hangscope.collect.progress import ProgressWatcher

        watcher = ProgressWatcher(watched, pyspy=self._pyspy, record=record,
                                  max_seconds=cap, record_limit=_record_limit())
        watcher.start()
        watcher.end_after(opts.window)
        self._watcher = watcher

    def _cost(self, proc: Process) -> float:
        """What sampling ``proc`` is expected to cost, to start the slowest first."""
        if (seconds := self._refresh.native_seconds(proc.pid)) is not None:
            return seconds
        found = self.discovery.found.get(proc.pid)
        # Native dumps cost by the size of what is mapped (libtorch: ~0.5 s per rank).
        return (found.vsize or 0) / 2**40 if found is not None and proc.python else 0.0

#: CPU clock ticks since discovery that say a process computes (with no thread in state R).
COMPUTE_TICKS = 2
#: Further unpaused reads of a process that computes before it is judged stuck-looking.
EXTRA_LOOKS = 2
#: Between those reads: a call that lasts longer than this three times over is "one place".
LOOK_INTERVAL_S = 0.1


#: A comprehension's or a lambda's frame: part of the line that made it (``while
#: any(flag != n for flag in flags): os.sched_yield()`` is one loop, in the genexpr or not).
_INNER = re.compile(r"<(?:genexpr|listcomp|setcomp|dictcomp|lambda)>$")


def _callers(key: tuple[tuple[str, str | None, int | None], ...]
             ) -> tuple[tuple[str, str | None, int | None], ...]:
    """A stack key (innermost first) without its innermost function: its comprehensions and
    lambdas, then the function itself, whose line a loop moves."""
    k = 0
    while k < len(key) and _INNER.search(key[k][0]):
        k += 1
    return key[k + 1:]


def _stayed(reads: Sequence[Round | None], pid: int) -> bool:
    """Whether a Python thread stayed in one function (the same callers; only the innermost
    line may differ: a loop) in every unpaused read while it used CPU: a spin-wait (a CUDA
    sync, a ``sched_yield`` loop) or one long native call; or the main thread kept one stack
    and never ran (blocked: a hung rank whose helper threads made it look busy). Either is
    worth a pause for its native frames. A read that failed: assume so."""
    dumps = [r.dump if r is not None else None for r in reads]
    if any(r is None or d is None or not d.ok for r, d in zip(reads, dumps, strict=True)):
        return True
    full = [{t.tid: stack_key(t) for t in d.threads if t.frames} for d in dumps if d is not None]
    keys = [{tid: _callers(key) for tid, key in k.items()} for k in full]
    first, last = reads[0], reads[-1]
    assert first is not None and last is not None
    cpu_was = {t.tid: t.sched[0] for t in first.proc.tasks if t.sched}
    cpu_now = {t.tid: t.sched[0] for t in last.proc.tasks if t.sched}
    if pid in full[0] and all(k.get(pid) == full[0][pid] for k in full[1:]) and (
            pid in cpu_was and cpu_now.get(pid) == cpu_was[pid]):
        return True  # the main thread is blocked where it was
    return any(all(_same_callers(k.get(tid), key) for k in keys[1:])
               and cpu_now.get(tid, 0) > cpu_was.get(tid, 0) for tid, key in keys[0].items())


def _same_callers(a: tuple[object, ...] | None, b: tuple[object, ...]) -> bool:
    """Two reads' callers of one thread are the same: equal, or one the other cut short (an
    unpaused read can lose its outermost frames: innermost first, a prefix of the other; one
    that kept only the innermost function says nothing against it)."""
    if a is None:
        return False  # the thread is gone from that read
    if not a or not b:
        return True
    short, full = (a, b) if len(a) <= len(b) else (b, a)
    return full[:len(short)] == short


#: The processes whose progress is watched: those that do the job's work.
WATCHED = frozenset({Role.RANK, Role.MAIN, Role.ENGINE_CORE})
#: Environment a torch.distributed launcher gives its ranks (analyze/evidence/roots.py's list).
_DISTRIBUTED_ENV = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")


def watched_pids(procs: Sequence[Process]) -> list[int]:
    """The ranks (or main) that run Python; a lone script, or a job without ranks: every
    Python process, its root included (it may be the work). Ranks numbered only by spawn
    order outside torch.distributed are a Python program's multiprocessing children: their
    parent is watched too (a server or an orchestrator the children wait on, whose own wait
    says whether the job is idle, paused or hung)."""
    python = [p for p in procs if p.python is not False]
    ranks = [p for p in python if p.role in WATCHED]
    if not ranks:
        return [p.pid for p in python if p.role in (Role.OTHER, Role.LAUNCHER)]
    # A framework's workers (Ray's actors and tasks, children of its raylet, not of a rank):
    # the driver hands work out and waits for it, so what they do is the job's progress.
    workers = [p.pid for p in python if not is_helper_role(p.role) and does_work(p.title)]
    plain = all(p.rank is not None and p.rank.source == "spawn-order" for p in ranks) and not any(
        k in p.environ for p in procs for k in _DISTRIBUTED_ENV)
    parents = {p.ppid for p in ranks}
    rank_pids = {p.pid for p in ranks}
    # A rank's DataLoader workers too: a rank blocked on their pipe for a whole window waits
    # for a batch they sleep or fetch for (a slow loader), which only their own window tells
    # from a loader stuck for good. Also a rank's other Python children: a worker that set its
    # own title (setproctitle in worker_init_fn) is known as one only from its stack, later.
    # A serving engine's front end (the launcher of an EngineCore or a detokenizer: vLLM's API
    # server, SGLang's tokenizer manager): every request passes through its event loop, and
    # only its window tells a loop that turns between requests from one a call never leaves.
    engines = {p.ppid for p in python if p.role in (Role.ENGINE_CORE, Role.DETOKENIZER)}
    return list(dict.fromkeys([p.pid for p in python if p.role in WATCHED or (
        p.role is Role.LAUNCHER and (p.pid in engines or (plain and p.pid in parents))) or (
        p.role in (Role.DATA_WORKER, Role.OTHER) and p.ppid in rank_pids)] + workers))


def _record_limit() -> int:
    """How many ranks get a ``py-spy record`` (~3% of a core each); the rest, counters only."""
    return max(8, 4 * _cores())


def _redacted(evidence: ProgressEvidence | None) -> ProgressEvidence | None:
    """The progress window with its thread names redacted, as the rounds' threads are."""
    if evidence is None:
        return None
    from hangscope.redact import redact_text

    return replace(evidence, processes=tuple(
        replace(p, threads=tuple(replace(t, name=redact_text(t.name)) if t.name else t
                                 for t in p.threads))
        for p in evidence.processes))


_warm = False


def _warm_imports(pool: ThreadPoolExecutor) -> None:
    """Import what the snapshot needs after its first round (~0.1 s of imports, dataclasses and
    regexes) on ``pool``'s thread while the first dumps run: py-spy's wait leaves the GIL free."""
    global _warm
    if not _warm:
        _warm = True
        pool.submit(_import_rest)


def _import_rest() -> None:
    import hangscope.analyze.evidence.classify
    import hangscope.analyze.evidence.group
    import hangscope.analyze.evidence.locals_wanted
    import hangscope.analyze.findings.checks
    import hangscope.analyze.verdict
    import hangscope.collect.collectives
    import hangscope.collect.progress
    import hangscope.collect.waits
    import hangscope.live.kernels
    import hangscope.render.output  # noqa: F401


def _read_kernel_log(pids: list[int], since: float | None) -> tuple[tuple[str, ...], str | None]:
    """The kernel log's lines about ``pids`` (collect/kmsg.py), imported on the host thread."""
    from hangscope.collect import kmsg

    return kmsg.read(pids, since)


def _seconds(ticks: int | None) -> float | None:
    return None if ticks is None else ticks / procfs.CLOCK_TICKS


def ptrace_fixes(pid: int) -> tuple[str, ...]:
    """The fixes for a refused py-spy, one per line of the verdict's evidence."""
    return (
        f"fix: run hangscope as root: `sudo hangscope dump {pid}`",
        "or: let py-spy trace without root: `sudo setcap cap_sys_ptrace+ep $(which py-spy)`",
        "or, where kernel.yama.ptrace_scope > 0: `sudo sysctl kernel.yama.ptrace_scope=0` "
        "(a user may then trace their own processes)",
        "in Docker: `docker run --cap-add SYS_PTRACE`; Kubernetes: "
        "securityContext.capabilities.add: [SYS_PTRACE]",
    )


def _pids(n: int) -> str:
    return "its Python process" if n == 1 else f"all {n} Python processes"


def _settled_note(window: float, asked: float) -> str:
    return (f"The window ended after {window:.1f} s of the {asked:g} s: every Python thread "
            f"of the job had been off CPU for longer before the dump, each in a wait that no "
            f"timeout ends within it, and nothing of the job moved since (--whole-window "
            f"watches it all).")


def _no_stacks(summary: str, fixes: Sequence[str]) -> Verdict:
    """The verdict of a report without stacks: the cause and its fix, never a diagnosis that
    no stack supports (the rules would read "all waiting" from stacks that were not taken)."""
    return Verdict(VerdictKind.NO_STACKS, Severity.WARNING,
                   f"{summary} Everything below is from /proc: states, CPU, wait channels, "
                   "sockets; no stack, so no diagnosis.", evidence=tuple(fixes))


def _refused(rounds: Sequence[dict[int, Round]], procs: Sequence[Process]) -> bool:
    """Every Python process refused py-spy for lack of privilege: no round read its stacks,
    and the failure kind py-spy's result carries (not its message's text) says permission."""
    def denied(pid: int) -> bool:
        dumps = [d for r in rounds if (d := r[pid].dump) is not None]
        return (bool(dumps) and not any(d.ok for d in dumps)
                and any(d.error_kind == "permission" for d in dumps))

    python = [p for p in procs if p.python]
    return bool(python) and all(denied(p.pid) for p in python)
