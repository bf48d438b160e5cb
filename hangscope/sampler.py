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
from collections.abc import Callable, Sequence
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
    workers: int | None = None  # parallel py-spy runs; default: 2 x cores, at most 32


@dataclass
class _Round:
    """One sampling round of one process."""

    dump: pyspy.DumpResult | None
    proc: procfs.ProcInfo
    reused: bool = False  # the PID now belongs to a process that started after discovery


def _workers(options: SampleOptions, n: int) -> int:
    if options.workers:
        return max(1, options.workers)
    # py-spy spends most of a dump waiting on the target's memory reads, so a little more
    # than one per core keeps both busy.
    return max(1, min(n, 2 * (os.cpu_count() or 1), 32))


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
        # Cache: pid -> (create_time, python stack keys by tid, native dump).
        self._native_cache: dict[int, tuple[float | None, dict[int, tuple], pyspy.DumpResult]] = {}
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
        found = tree.walk(root)
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
    def _dump(self, proc: Process, native: bool) -> pyspy.DumpResult | None:
        if proc.python is False:
            return None
        skip = _not_sampleable(proc.pid)
        if skip is not None:  # py-spy would attach to a stopped process or a corpse
            return pyspy.DumpResult(proc.pid, error=skip[1], error_kind=skip[0])
        return pyspy.dump(proc.pid, native=native and not self.options.nonblocking,
                          timeout=self.options.timeout, nonblocking=self.options.nonblocking,
                          pyspy=self._pyspy)

    def _round(self, pool: ThreadPoolExecutor, procs: Sequence[Process], native: bool,
               reuse: dict[int, pyspy.DumpResult], fds: bool = False) -> dict[int, _Round]:
        def one(proc: Process) -> tuple[int, _Round]:
            # A PID checked before py-spy runs (never trace a stranger) and after (the rank
            # may have exited and its PID been handed out while py-spy ran).
            if _replaced(proc):
                return proc.pid, _Round(None, procfs.ProcInfo(proc.pid, exists=False), True)
            dump = reuse.get(proc.pid) or self._dump(proc, native)
            info = procfs.read_process(proc.pid, with_fds=native or fds)
            if _replaced(proc):
                return proc.pid, _Round(None, procfs.ProcInfo(proc.pid, exists=False), True)
            return proc.pid, _Round(dump, info)

        return dict(pool.map(one, procs))

    def snapshot(self) -> Snapshot:
        """Discover, sample over the window, analyze: one complete Snapshot."""
        started = self.clock()
        job, procs = self.discover()
        opts = self.options
        samples = max(1, opts.samples)
        interval = opts.window / (samples - 1) if samples > 1 else 0.0
        cpu_before = {p.pid: _cpu_times(p.pid) for p in procs}
        listening = procfs.read_listening()
        gpu_readings = [self._read_gpus()]
        rounds: list[dict[int, _Round]] = []
        with ThreadPoolExecutor(max_workers=_workers(opts, len(procs))) as pool:
            t0 = self.clock()
            first_python = self._python_only_if_unchanged(pool, procs)
            rounds.append(self._round(pool, procs, opts.native, first_python, fds=True))
            for i in range(1, samples):
                delay = t0 + i * interval - self.clock()
                if delay > 0:
                    time.sleep(delay)  # the sampling interval itself, not a readiness wait
                rounds.append(self._round(pool, procs, False, {}))
                gpu_readings.append(self._read_gpus())
            window = self.clock() - t0
        cpu_after = {p.pid: _cpu_times(p.pid) for p in procs}
        reading = nvml.merge_readings(gpu_readings)
        merged = [self._merge(p, rounds, cpu_before, cpu_after, window, listening, reading)
                  for p in procs]
        merged = logs.attach_tails(merged, redact=opts.redact)
        self._remember_native(merged, rounds)
        snap = Snapshot(
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            hangscope=__version__,
            hosts=(replace(
                _host(reading),
                listening_ports=tuple(sorted({s.port for s in listening.values() if s.port})),
                kernel_messages=kmsg.read_kernel_messages(
                    [p.pid for p in merged],
                    min((p.create_time for p in merged if p.create_time), default=None))),),
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
    def _python_only_if_unchanged(self, pool: ThreadPoolExecutor,
                                  procs: Sequence[Process]) -> dict[int, pyspy.DumpResult]:
        """Reuse a process's native stacks when a cheap Python-only dump shows no change."""
        if not self.options.native or not self._native_cache:
            return {}
        cached = [p for p in procs if p.pid in self._native_cache]

        def check(proc: Process) -> tuple[int, pyspy.DumpResult | None]:
            create, keys, native = self._native_cache[proc.pid]
            if create != proc.create_time:
                return proc.pid, None
            fresh = self._dump(proc, native=False)
            if fresh is None or not fresh.ok:
                return proc.pid, None
            if {t.tid: _stack_key(t) for t in fresh.threads} != keys:
                return proc.pid, None
            return proc.pid, native

        reuse = {pid: dump for pid, dump in pool.map(check, cached) if dump is not None}
        return reuse

    def _remember_native(self, procs: Sequence[Process], rounds: list[dict[int, _Round]]) -> None:
        self._native_cache.clear()
        for proc in procs:
            first = rounds[0].get(proc.pid)
            if first and first.dump and first.dump.ok and first.dump.native:
                keys = {t.tid: _stack_key(t) for t in first.dump.threads}
                last = rounds[-1].get(proc.pid)
                if last and last.dump and last.dump.ok and (
                        {t.tid: _stack_key(t) for t in last.dump.threads} == keys):
                    self._native_cache[proc.pid] = (proc.create_time, keys, first.dump)

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
            gpus=nvml.gpus_of_process(proc.pid, proc.environ, reading),
            kernel_stack=info.kernel_stack, errors=tuple(errors),
            major_faults_window=faults,
            exit_code=exitcode.read_exit_code(proc.pid) if state in ("Z", "X") else None,
            python=proc.python if base is None else True,
        )


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


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


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
    try:
        status = psutil.Process(pid).status()
    except psutil.Error:
        return None  # py-spy reports what is wrong
    if status == psutil.STATUS_STOPPED:
        return "stopped", (f"stopped (state T: SIGSTOP, Ctrl-Z or a debugger): not sampled, and "
                           f"left stopped; `kill -CONT {pid}` resumes it")
    if status == psutil.STATUS_TRACING_STOP:
        return "stopped", ("held by a debugger or another tracer (state t): not sampled, "
                           "and left as it is")
    if status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
        return "gone", ("a zombie: it has exited and its parent has not reaped it; "
                        "no stacks to sample")
    return None


def _cpu_times(pid: int) -> float | None:
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return times.user + times.system


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
