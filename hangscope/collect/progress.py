"""Progress evidence over a sampling window, read without pausing any target.

A watcher started at the beginning of the window and stopped at its end collects three kinds of
evidence that a spin-wait or a sleep loop cannot fake between them:

* dense Python-only sampling: ``py-spy record --nonblocking --idle --threads --rate 100
  --format raw --pid N`` (one per process), stopped with SIGINT so that it writes what it saw;
  per thread: the distinct Python stacks and how many samples each got;
* per-thread kernel counters read at start and stop: ``/proc/PID/task/TID/schedstat`` (ns on
  CPU, times scheduled), ``/proc/PID/task/TID/status`` (voluntary and involuntary context
  switches) and ``/proc/PID/task/TID/stat`` (utime + stime), plus ``/proc/PID/io`` (read and
  write syscalls and bytes: gloo's socket traffic shows there);
* GPM metrics of the GPUs (``nvidia-smi dmon --gpm-metrics``), see :class:`GpmWindow`.

Every failure is a value (``error`` fields), never an exception.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from hangscope.collect import procfs
from hangscope.collect.nvml import GpmWindow
from hangscope.collect.pyspy import find_pyspy
from hangscope.collect.recorder import Recorder, parse_raw, start_recorder, stop_recorder
from hangscope.errors import ToolMissing
from hangscope.model.progress import (
    CounterDelta,
    IoDelta,
    ProcessProgress,
    ProgressEvidence,
    StackCount,
    ThreadProgress,
)

#: Samples per second of the dense Python-only sampling.
RATE = 100
#: How long py-spy may take to write its file after SIGINT before it is killed.
STOP_GRACE_S = 3.0


@dataclass(frozen=True)
class Counters:
    """One thread's kernel counters at one instant."""

    cpu_ns: int | None  # schedstat field 1: ns on CPU
    runs: int | None  # schedstat field 3: times scheduled in
    voluntary: int | None  # voluntary_ctxt_switches: it blocked and was woken
    involuntary: int | None  # nonvoluntary_ctxt_switches: preempted while runnable
    ticks: int  # utime + stime, clock ticks
    queued_ns: int | None = None  # schedstat field 2: ns runnable, waiting for a CPU


# --- kernel counters ----------------------------------------------------------------------



def read_counters(pid: int) -> dict[int, tuple[Counters, str | None, str | None]]:
    """Every thread's counters, name and state: ``/proc/PID/task/*/{schedstat,status,stat}``."""
    found: dict[int, tuple[Counters, str | None, str | None]] = {}
    for task in procfs.read_tasks(pid, wchan=False):
        voluntary, involuntary = procfs.read_thread_switches(pid, task.tid)
        cpu_ns, runs, queued_ns = task.sched if task.sched is not None else (None, None, None)
        counters = Counters(cpu_ns, runs, voluntary, involuntary, task.utime + task.stime,
                            queued_ns)
        found[task.tid] = (counters, task.comm, task.state)
    return found


#: Threads of one process whose own I/O counters are read (a 1,000-thread process costs 2,000
#: more reads per window otherwise); past it, the process's I/O is judged as a whole.
THREAD_IO_LIMIT = 256


def read_io(pid: int, tid: int | None = None) -> dict[str, int] | None:
    """``cat /proc/PID/io`` (or one thread's ``/proc/PID/task/TID/io``); None when unreadable."""
    return procfs.read_io(pid, tid)


def _thread_io(pid: int, tasks: dict[int, object]) -> dict[int, dict[str, int] | None]:
    """Each thread's own I/O counters (the first :data:`THREAD_IO_LIMIT` threads)."""
    if len(tasks) > THREAD_IO_LIMIT:
        return {}
    return {tid: read_io(pid, tid) for tid in tasks}


def _minus(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else max(0, after - before)


def _delta(before: Counters, after: Counters, state: str | None) -> CounterDelta:
    return CounterDelta(
        cpu_ns=_minus(after.cpu_ns, before.cpu_ns),
        runs=_minus(after.runs, before.runs),
        voluntary=_minus(after.voluntary, before.voluntary),
        involuntary=_minus(after.involuntary, before.involuntary),
        ticks=max(0, after.ticks - before.ticks),
        state=state,
        queued_ns=_minus(after.queued_ns, before.queued_ns),
    )


def _io_delta(before: dict[str, int] | None, after: dict[str, int] | None) -> IoDelta | None:
    if before is None or after is None:
        return None
    return IoDelta(**{k: max(0, after.get(k, 0) - before.get(k, 0))
                      for k in ("syscr", "syscw", "rchar", "wchar")})


def _cpu_of_children() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


class ProgressWatcher:
    """Watch processes over a window without pausing them: ``start()``, then ``stop()``.

    ``ProgressWatcher(pids).start()`` at the beginning of the sampling window;
    ``stop()`` at its end returns a frozen :class:`ProgressEvidence`. Never raises; always
    stops what it started (also when used as a context manager and the caller fails).
    """

    def __init__(self, pids: Iterable[int], *, rate: int = RATE, gpus: bool = True,
                 gpu_indices: Iterable[int] | None = None, pyspy: str | None = None,
                 record: bool = True, max_seconds: float | None = None,
                 record_limit: int | None = None) -> None:
        self.pids = tuple(dict.fromkeys(pids))
        self.rate = rate
        self.record = record  # False: counters and GPM only (a live view's cheap refresh)
        # py-spy record's --duration: were this process killed before stop(), its recorders
        # would otherwise sample until their targets exit
        self.max_seconds = max_seconds
        # at most this many recorders (the first PIDs): each costs ~3% of a core at 100 Hz,
        # so 64 ranks on a small host would starve the job; the others get counters and GPM
        self.record_limit = record_limit
        self._pyspy = pyspy
        self._gpm = GpmWindow(gpu_indices) if gpus else None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._recorders: list[Recorder] = []
        self._before: dict[int, dict[int, tuple[Counters, str | None, str | None]]] = {}
        self._io_before: dict[int, dict[str, int] | None] = {}
        self._thread_io_before: dict[int, dict[int, dict[str, int] | None]] = {}
        self._t0 = 0.0
        self._cpu0 = 0.0
        self._error: str | None = None
        self._pauses: dict[int, int] = {}
        self._paused_s: dict[int, float] = {}  # how long blocking reads held each stopped
        self._watched = frozenset(self.pids)
        self._span = 0.0  # end_after's window
        # Pauses in flight (``pausing``) and the window's end: the end waits for the first
        # and holds new ones back while it reads the counters.
        self._cond = threading.Condition()
        self._in_flight = 0
        self._closing = False
        self._closed = False
        # The window's end, once reached: by stop() or by the timer of end_after()
        self._ending = threading.Lock()
        self._timer: threading.Timer | None = None
        self._evidence: ProgressEvidence | None = None

    def note_pause(self, pid: int, count: int = 1, seconds: float = 0.0) -> None:
        """Tell the watcher that a blocking py-spy read stopped ``pid`` during the window
        (``seconds``: how long it held it; one after the window's end is not counted)."""
        with self._cond:
            if not self._closed:
                self._pauses[pid] = self._pauses.get(pid, 0) + count
                self._paused_s[pid] = self._paused_s.get(pid, 0.0) + seconds

    @contextlib.contextmanager
    def pausing(self, pid: int) -> Iterator[None]:
        """Around a blocking py-spy read of ``pid``: its ptrace stop wakes every thread, which
        is not the target's doing. The window never ends halfway through one (its counters
        would hold half a pause's wake-ups, uncounted): the end waits for the reads in flight,
        and one that starts while the end reads the counters waits for it (and falls after
        the window, not counted). A process not watched has no counters to spoil: its reads
        never wait (nor make the end wait)."""
        if pid not in self._watched:
            yield
            return
        with self._cond:
            while self._closing:
                self._cond.wait()
            self._in_flight += 1
        began = time.monotonic()
        try:
            yield
        finally:
            self.note_pause(pid, seconds=time.monotonic() - began)
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def __enter__(self) -> ProgressWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the recorders, read the counters and the first GPM sample."""
        self._folder = tempfile.TemporaryDirectory(prefix="hangscope-progress-")
        self._cpu0 = _cpu_of_children()
        try:
            pyspy = (self._pyspy or find_pyspy()) if self.record else ""
        except ToolMissing as exc:
            self._error = str(exc)
        else:
            cap = None if self.max_seconds is None else max(1, math.ceil(self.max_seconds))
            recorded = self.pids[:self.record_limit] if self.record else ()
            self._recorders = [start_recorder(pyspy, pid, self.rate, self._folder.name, cap)
                               for pid in recorded]
        if self._gpm is not None:
            self._gpm.start()
        self._t0 = time.monotonic()
        for pid in self.pids:
            self._before[pid] = read_counters(pid)
            self._io_before[pid] = read_io(pid)
            self._thread_io_before[pid] = _thread_io(pid, self._before[pid])

    def end_after(self, seconds: float) -> None:
        """End the window by itself ``seconds`` from now, whatever the caller is doing then.

        A cold dump's first round can outlast the window on a machine whose cores the job
        holds (a busy vLLM Worker's OpenMP threads: each native dump there takes seconds);
        recorders left running until the rounds are done sample a 49-thread process at 100 Hz
        for all that time, the largest share of a busy dump's CPU, which in turn slows the
        rounds. The window asked for is the window watched; ``stop()`` then returns it.
        """
        self._span = seconds
        self._arm(seconds)

    def _arm(self, seconds: float) -> None:
        timer = threading.Timer(max(0.0, seconds), self._end_when_due)
        timer.daemon = True
        timer.name = "hangscope-window-end"
        self._timer = timer
        timer.start()

    def _end_when_due(self) -> None:
        """Each watched process is seen unpaused for the whole window: one that a blocking
        read held stopped for a while (a native dump on a loaded machine) would show that
        much less of its own activity, so the end moves on by the longest such pause."""
        with self._cond:
            while self._in_flight and not self._closed:  # its length is known at its end
                self._cond.wait()
            held = max(self._paused_s.values(), default=0.0)
        left = self._t0 + self._span + held - time.monotonic()
        if left > 0.01 and not self._closed:
            self._arm(left)
        else:
            self._end()

    def still(self, pid: int, cpu_share: float) -> bool:
        """Whether ``pid`` did nothing since the window began but its helpers' wake-ups: it
        read and wrote no byte (``/proc/PID/io``; not its syscall counts: a py-spy pause
        interrupts a blocked read, which then runs again) and its threads' CPU (schedstat; a
        thread started since counts whole) grew by less than ``cpu_share`` of one core over
        the time since. False where a counter is unknown."""
        before, io_before = self._before.get(pid), self._io_before.get(pid)
        io = read_io(pid)
        if not before or io_before is None or io is None or any(
                io.get(k) != io_before.get(k) for k in ("rchar", "wchar")):
            return False
        cpu_ns = 0
        for tid, (counters, _, _) in read_counters(pid).items():
            was = before[tid][0].cpu_ns if tid in before else 0
            if counters.cpu_ns is None or was is None:
                return False
            cpu_ns += max(0, counters.cpu_ns - was)
        return cpu_ns < cpu_share * (time.monotonic() - self._t0) * 1e9

    @property
    def ended(self) -> ProgressEvidence | None:
        """The window's evidence once it is over (``end_after``); None while it runs."""
        return self._evidence

    def stop(self) -> ProgressEvidence:
        """End the window now (or return the window ``end_after`` ended)."""
        if self._timer is not None:
            self._timer.cancel()
        return self._end()

    def _end(self) -> ProgressEvidence:
        with self._ending:
            if self._evidence is None:
                self._evidence = self._stop_now()
            return self._evidence

    def _stop_now(self) -> ProgressEvidence:
        """Counters and GPM first (the window's true end), then py-spy's files."""
        if self._folder is None:
            return ProgressEvidence(0.0, self.rate, error="the watcher was never started")
        with self._cond:
            self._closing = True
            while self._in_flight:
                self._cond.wait()
        try:
            seconds = time.monotonic() - self._t0
            after = {pid: read_counters(pid) for pid in self.pids}
            io_after = {pid: read_io(pid) for pid in self.pids}
            thread_io_after = {pid: _thread_io(pid, after[pid]) for pid in self.pids}
        finally:
            with self._cond:
                self._closing, self._closed = False, True
                self._cond.notify_all()
        gpus = self._gpm.stop() if self._gpm is not None else ()
        deadline = time.monotonic() + STOP_GRACE_S
        for rec in self._recorders:  # signal all first, then wait: they stop in parallel
            if rec.proc is not None and rec.proc.poll() is None:
                rec.proc.send_signal(signal.SIGINT)
        for rec in self._recorders:
            stop_recorder(rec, deadline)
        processes = tuple(self._process(pid, after[pid], io_after[pid], thread_io_after[pid])
                          for pid in self.pids)
        cpu = _cpu_of_children() - self._cpu0
        with contextlib.suppress(OSError):
            self._folder.cleanup()
        self._folder = None
        return ProgressEvidence(
            seconds=round(seconds, 4), rate=self.rate, processes=processes, gpus=gpus,
            gpu_error=self._gpm.error if self._gpm is not None else None,
            sampler_cpu_s=round(cpu, 4), error=self._error, record_limit=self.record_limit,
        )

    def _process(self, pid: int, after: dict[int, tuple[Counters, str | None, str | None]],
                 io_after: dict[str, int] | None,
                 thread_io: dict[int, dict[str, int] | None] | None = None) -> ProcessProgress:
        rec = next((r for r in self._recorders if r.pid == pid), None)
        raw: dict[int, tuple[str | None, dict[tuple[str, ...], int]]] = {}
        if rec is not None and rec.error is None:
            try:
                with open(rec.out, errors="replace") as fh:
                    parsed = parse_raw(fh.read())
                raw = parsed.get(0) or parsed.get(pid) or {}
            except OSError:
                rec.error, rec.error_kind = "py-spy wrote no samples", "failed"
        before = self._before.get(pid, {})
        threads = []
        for tid in sorted(set(raw) | set(after)):
            name, stacks = raw.get(tid, (None, {}))
            delta = None
            if tid in before and tid in after:
                counters, comm, state = after[tid]
                delta = _delta(before[tid][0], counters, state)
                name = name or comm
            ordered = tuple(StackCount(frames, n) for frames, n in
                            sorted(stacks.items(), key=lambda item: -item[1]))
            io_before = self._thread_io_before.get(pid, {}).get(tid)
            threads.append(ThreadProgress(tid=tid, name=name, samples=sum(stacks.values()),
                                          stacks=ordered, counters=delta, io=_io_delta(
                                              io_before, (thread_io or {}).get(tid))))
        gone = not after and not procfs.exists(pid)
        return ProcessProgress(
            pid=pid, threads=tuple(threads), io=_io_delta(self._io_before.get(pid), io_after),
            sampled=bool(raw), error=(rec.error if rec else self._error),
            error_kind=(rec.error_kind if rec else "missing" if self._error else None), gone=gone,
            pauses=self._pauses.get(pid, 0),
        )


@dataclass(frozen=True)
class Timed:
    """A watched window and what starting and stopping the watcher cost (wall seconds)."""

    evidence: ProgressEvidence
    start_s: float
    stop_s: float


def watch(pids: Iterable[int], seconds: float, **options: Any) -> Timed:
    """Watch ``pids`` for ``seconds`` (blocking); ``options`` go to :class:`ProgressWatcher`."""
    t0 = time.monotonic()
    watcher = ProgressWatcher(pids, **options)
    watcher.start()
    started = time.monotonic()
    time.sleep(seconds)
    stopping = time.monotonic()
    evidence = watcher.stop()
    return Timed(evidence, started - t0, time.monotonic() - stopping)
