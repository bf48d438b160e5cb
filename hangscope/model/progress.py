"""Progress evidence: what the watcher saw over a window (collect/progress.py writes it).

Pure, frozen data, read by the decision (analyze/evidence/progress.py) and recorded as test
fixtures.
Like model/nccl.py, no ``from __future__ import annotations``: field types are real objects, so
a generic reader can resolve them. Definitions in dependency order.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpmReading:
    """GPM metrics of one GPU between two samples: percentages, and MiB/s for links."""

    index: int
    seconds: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)  # only those the GPU answered
    error: str | None = None  # why there are none: no driver, GPM unsupported, GPU lost


@dataclass(frozen=True)
class CounterDelta:
    """How one thread's counters moved over the window (None: unknown at one end)."""

    cpu_ns: int | None = None
    runs: int | None = None
    voluntary: int | None = None
    involuntary: int | None = None
    ticks: int = 0
    state: str | None = None  # the thread's state at the end (R, S, D, ...)
    queued_ns: int | None = None  # ns runnable on a run queue, waiting for a CPU


@dataclass(frozen=True)
class IoDelta:
    """``/proc/PID/io`` over the window: syscalls and bytes (sockets and pipes count too)."""

    syscr: int = 0
    syscw: int = 0
    rchar: int = 0
    wchar: int = 0


@dataclass(frozen=True)
class StackCount:
    """One distinct Python stack (outermost first, ``"func (file:line)"``) and its samples."""

    frames: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class ThreadProgress:
    """One thread over the window: its stacks (most sampled first) and its counters."""

    tid: int
    name: str | None = None
    samples: int = 0
    stacks: tuple[StackCount, ...] = ()
    counters: CounterDelta | None = None
    # ``/proc/PID/task/TID/io`` over the window: whose I/O it was (a heartbeat thread's writes
    # are not the working thread's data); None where unread (older recordings)
    io: IoDelta | None = None


@dataclass(frozen=True)
class ProcessProgress:
    """One process over the window."""

    pid: int
    threads: tuple[ThreadProgress, ...] = ()
    io: IoDelta | None = None
    sampled: bool = False  # py-spy gave samples
    error: str | None = None  # why py-spy gave none (permission, not Python, gone, ...)
    error_kind: str | None = None
    gone: bool = False  # the process exited during the window
    # blocking py-spy reads (ptrace stops) the caller took during the window, via note_pause:
    # each wakes every thread of the target twice (measured), which is not the target's doing
    pauses: int = 0


@dataclass(frozen=True)
class Newcomer:
    """A child of a process of the job, born during the dump (after discovery listed the
    job): not sampled, its birth and its CPU read from ``/proc/PID/stat`` as the window ends
    (a Ray worker the raylet starts for the actor the driver waits on)."""

    pid: int
    ppid: int
    title: str  # its command line as one string (redacted like a process's)
    born_s: float  # seconds after the dump began
    cpu_s: float  # user + system CPU since its birth
    state: str | None = None  # R, S, D, Z... at the window's end


@dataclass(frozen=True)
class ProgressEvidence:
    """What a :class:`ProgressWatcher` saw between start and stop."""

    seconds: float
    rate: int
    processes: tuple[ProcessProgress, ...] = ()
    gpus: tuple[GpmReading, ...] = ()
    gpu_error: str | None = None  # NVML unusable as a whole (no driver, ...)
    sampler_cpu_s: float = 0.0  # CPU the py-spy recorders used (user + system)
    error: str | None = None  # the watcher could not sample at all (py-spy missing)
    # at most this many processes got a py-spy recorder (None: no limit); the others were
    # judged by kernel counters and the GPU
    record_limit: int | None = None
    # children of the job's processes born during the dump, read as the window ends
    newcomers: tuple[Newcomer, ...] = ()

    def process(self, pid: int) -> ProcessProgress | None:
        return next((p for p in self.processes if p.pid == pid), None)


@dataclass(frozen=True)
class RankProgress:
    """The decision for one process and the evidence that decided it."""

    pid: int
    decision: str  # progressing | stuck | slow
    evidence: str  # python | gpu | counters | kernel (a native server) | none
    reason: str  # one sentence for the user
    tid: int | None = None  # the thread judged
    gpu: str | None = None  # what its GPUs do, whatever decided: "busy" says if work moves
    gpu_state: str | None = None  # work | spin | idle | busy | unknown (None: no GPM reading)
    # Collectives the dense samples saw it in ("all_reduce at step (train.py:16)"): a running
    # rank's normal path, which breaks a tie between the stuck ranks of another replica.
    seen: tuple[str, ...] = ()
    # Times the judged thread woke in the window, py-spy's pauses discounted (None: unknown):
    # 0 with a sleep is a pause, many with no line left and no data is a poll
    wakes: int | None = None
    # It burns its core waiting (a spin-wait): where no rule holds, the verdict names it
    spins: bool = False
    # Its wake-ups were returns of a blocking socket read (bytes came): a stream it consumes,
    # or a long poll its server answers empty (calm reads that from the server: idle)
    socket_reads: bool = False
    # Where a thread whose line moved spent most of the window: that stack's Python frames as
    # ``func (file)``, innermost first (a server loop's select, though the window's end caught
    # it in a handler); () where its line did not move
    mostly: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobProgress:
    """The job as a whole."""

    decision: str
    reason: str
    ranks: tuple[RankProgress, ...] = ()
    seconds: float = 0.0  # the window watched
    note: str | None = None  # what could not be watched, and why (py-spy record failed, ...)
