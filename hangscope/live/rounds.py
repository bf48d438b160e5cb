"""Fold the K sampling rounds of one process into one Process: pure, no I/O.

The sampler reads; this module only combines what it read: which stacks stayed the same and
for how many samples, which round's dump to show, what failed and what that cost, CPU over
the window, sockets, GPUs, faults. Given the same rounds it gives the same Process.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace

from hangscope.collect import nvml, procfs, pyspy
from hangscope.model import ZOMBIE_STATES, Process, Socket, StackKey, Thread, stack_key_of
from hangscope.redact import redact_text

ASLEEP = frozenset("SD")  # a thread in these states is not on a CPU


def stack_key(thread: pyspy.PyThread) -> StackKey:
    """The Python frames that identify a sampled stack (as ``model.Thread.stack_key``)."""
    return stack_key_of(thread.frames)


@dataclass
class Round:
    """One sampling round of one process."""

    dump: pyspy.DumpResult | None
    proc: procfs.ProcInfo
    reused: bool = False  # the PID now belongs to a process that started after discovery
    # The scheduler counters at a moment the stacks of ``dump`` were exact, if one is known.
    anchor: Marks | None = None
    # The threads just before a blocking dump stopped them (the read after it sees them
    # resuming from the stop): their states and wchans are the ones the dump's stacks had.
    at_dump: tuple[procfs.TaskInfo, ...] | None = None


@dataclass(frozen=True)
class Marks:
    """A process's threads at a moment its Python stacks were known exactly.

    ``tids``: every thread then. ``python``: (state, schedstat: ns on CPU, times scheduled,
    ns queued) of each Python thread, all asleep. Equal again later means none of them has
    run since, so the stacks are still the same: no py-spy, no pause.
    """

    tids: frozenset[int]
    python: dict[int, tuple[str | None, tuple[int, int, int] | None]]

    @staticmethod
    def between(before: Sequence[procfs.TaskInfo], after: Sequence[procfs.TaskInfo],
                python: Collection[int]) -> Marks | None:
        """Marks when no Python thread ran between the two reads (a read in between is
        exact, though it did not pause the process); None when one did or it cannot tell."""
        tids = frozenset(t.tid for t in after)
        if frozenset(t.tid for t in before) != tids or not set(python) <= tids:
            return None
        was = {t.tid: (t.state, t.sched) for t in before if t.tid in python}
        now = {t.tid: (t.state, t.sched) for t in after if t.tid in python}
        if was != now or not all(v[0] in ASLEEP and v[1] is not None for v in now.values()):
            return None
        return Marks(tids, now)

    def still(self, tasks: Sequence[procfs.TaskInfo]) -> bool:
        """Whether none of the Python threads has run since the marks were taken."""
        if frozenset(t.tid for t in tasks) != self.tids:
            return False
        return {t.tid: (t.state, t.sched) for t in tasks
                if t.tid in self.python} == self.python


@dataclass(frozen=True)
class Window:
    """What the sampler read once for the whole window, shared by every process's merge."""

    seconds: float
    cpu_before: dict[int, float | None]  # CPU seconds by PID at the start and at the end
    cpu_after: dict[int, float | None]
    listening: dict[int, Socket] = field(default_factory=dict)  # socket inode -> listener
    gpus: nvml.GpuReading = field(default_factory=nvml.GpuReading)
    exit_codes: dict[int, int | None] = field(default_factory=dict)  # zombies' exit codes
    # PID -> TID -> seconds off CPU as sampling began (procfs.read_off_cpu).
    off_cpu: dict[int, dict[int, float]] = field(default_factory=dict)


def torn(dump: pyspy.DumpResult) -> bool:
    """A read that does not pause the process can tear a stack that changes under it (a
    compiler's deep recursion: py-spy gave up ten frames in, from the innermost): its main
    thread's outermost Python frame is then any function, where a whole stack starts where
    the interpreter runs code (:data:`_ENTRIES`)."""
    main = next((t for t in dump.threads if t.tid == dump.pid), None)
    python = [f for f in main.frames if not f.native] if main is not None else []
    return bool(python) and python[-1].name.rsplit(".", 1)[-1] not in _ENTRIES


#: Where the interpreter starts a main thread's code: a script's module, runpy (``python -m``),
#: a thread's bootstrap (a child forked from a thread), the exit's thread joins and atexit.
_ENTRIES = frozenset({"<module>", "_run_module_as_main", "_bootstrap", "_shutdown",
                      "_exit_function"})


def _as_paused(tasks: Sequence[procfs.TaskInfo],
               at_dump: Sequence[procfs.TaskInfo] | None) -> tuple[procfs.TaskInfo, ...]:
    """The threads' states as the last dump's stacks had them. A blocking dump stops every
    thread: one asleep in a syscall is woken into the stop and, let go, is runnable until it
    is back in that syscall, which on a loaded machine takes a while (a thread blocked in a
    pipe read read "runs on CPU"). Asleep just before the pause and runnable with no wait
    channel just after: the pause's doing, so the state before it stands (its counters are
    the later read's)."""
    before = {t.tid: t for t in at_dump or ()}
    return tuple(
        replace(t, state=was.state, wchan=was.wchan)
        if t.state == "R" and not t.wchan and (was := before.get(t.tid)) is not None
        and was.state in ASLEEP else t
        for t in tasks)


def merge_rounds(proc: Process, rounds: Sequence[dict[int, Round]], window: Window,
                 redact: bool = True) -> Process:
    """One process over the window: its stacks, how long each stayed, its /proc facts.

    Pure: everything it needs was read by the sampler (``window``); nothing here touches the
    process again.
    """
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
    # The first native dump where there is one: a process that computed was read without
    # pausing it first and natively only once it was seen stuck (Sampler._round). Of those,
    # one whose main thread's stack is whole (torn).
    base = min((d for d in dumps if d is not None and d.ok),
               key=lambda d: (not d.native, torn(d)), default=None)  # (the first of equals)
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
            key = stack_key(thread)
            seen[thread.tid] = seen.get(thread.tid, 0) + 1
            if last_key.get(thread.tid) == key:
                unchanged[thread.tid] = unchanged.get(thread.tid, 1) + 1
            else:
                unchanged[thread.tid] = 1
            last_key[thread.tid] = key
    paused = last.at_dump if info is last.proc else None
    tasks = {t.tid: t for t in _as_paused(info.tasks, paused)}
    off_cpu = window.off_cpu.get(proc.pid, {}) if not reused else {}
    threads: list[Thread] = []
    base_threads = base.threads if base else ()
    for pt in base_threads:
        task = tasks.pop(pt.tid, None)
        name = pt.name or (task.comm if task else None)
        threads.append(Thread(
            tid=pt.tid, name=redact_text(name) if name and redact else name,
            state=task.state if task else None, wchan=task.wchan if task else None,
            active=pt.active, owns_gil=pt.owns_gil, frames=pt.frames, python=True,
            unchanged_samples=unchanged.get(pt.tid, 1), samples=seen.get(pt.tid, 1),
            off_cpu_s=_seconds(off_cpu.get(pt.tid))))
    for task in tasks.values():  # threads without Python: their comm is the target's text
        comm = redact_text(task.comm) if task.comm and redact else task.comm
        threads.append(Thread(tid=task.tid, name=comm, state=task.state,
                              wchan=task.wchan, python=False,
                              off_cpu_s=_seconds(off_cpu.get(task.tid))))
    state = info.state if info.exists and last.proc.exists else "gone"
    cpu = None
    before, after = window.cpu_before.get(proc.pid), window.cpu_after.get(proc.pid)
    if before is not None and after is not None and window.seconds > 0 and not reused:
        cpu = round(100.0 * (after - before) / window.seconds, 1)
    # Sockets are listed in round one (fds are read once): a listener is not lost later.
    inodes = first.proc.socket_inodes | info.socket_inodes
    socks = tuple(window.listening[i] for i in sorted(inodes) if i in window.listening)
    faults = (last.proc.major_faults - first.proc.major_faults
              if last.proc.major_faults is not None and first.proc.major_faults is not None
              else None)
    if info.permission_denied:
        errors.append("permission denied reading /proc/PID/fd")
    return replace(
        proc, state=state, ppid=info.ppid if info.ppid is not None else proc.ppid,
        cpu_percent=cpu, rss=info.rss, vms=info.vms, swap=info.swap,
        major_faults=info.major_faults, num_threads=info.threads, num_fds=first.proc.num_fds,
        fd_limit=first.proc.fd_limit,
        fds=first.proc.fds, log_files=first.proc.log_files, listening=socks,
        threads=tuple(threads), native_sampled=bool(base and base.native),
        # The fd links round one read: never listed again here (an unread fd table is ()).
        gpus=nvml.gpus_of_process(proc.pid, proc.environ, window.gpus, first.proc.fd_targets),
        kernel_stack=info.kernel_stack, errors=tuple(errors),
        major_faults_window=faults, pgrp=info.pgrp, terminal_pgrp=info.terminal_pgrp,
        stack_start=info.stack_start, tracer=info.tracer, signals_blocked=info.signals_blocked,
        signals_ignored=info.signals_ignored, signals_caught=info.signals_caught,
        exit_code=window.exit_codes.get(proc.pid) if state in ZOMBIE_STATES else None,
        python=proc.python if base is None else True,
    )


def _seconds(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
