"""The Snapshot model: complete, detached, serialisable data about one hung job.

Pure data. Nothing here imports psutil, pynvml or subprocess, and nothing reaches back into
a live process: a vanished PID is a state, not an exception. ``None`` means unknown.
Why one file: the whole JSON contract, and the facts derived from it, in one place (a field
added here is one schema change); evidence records of their own kind live in model/nccl.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any

from hangscope.model.kernels import KernelRead
from hangscope.model.nccl import CollectiveEvidence, FrReading, RasReading
from hangscope.model.progress import JobProgress, ProgressEvidence
from hangscope.model.waits import WaitEvidence, WaitGraph

SCHEMA = "hangscope.dump/1"


#: Where a path is a library's, not the program's own: installed packages, the standard
#: library, code without a file (``<frozen runpy>``, ``<string>``).
LIBRARY_MARKERS = ("site-packages/", "dist-packages/", "/lib/python3", "<")


def in_library(path: str | None) -> bool:
    """``path`` is no file of the program's own code (None: unknown, so not the program's)."""
    return not path or any(marker in path for marker in LIBRARY_MARKERS)


class Category(str, Enum):
    """Where a thread is blocked; the order of the signature table decides ties. Each member
    has its row (verb, specificity, waits or works, style, meaning) in model/categories.py."""

    COLLECTIVE = "collective"
    COMM_INIT = "comm_init"
    CUDA_SYNC = "cuda_sync"
    CUDA_LAUNCH = "cuda_launch"
    JIT_COMPILE = "jit_compile"
    GIL_WAIT = "gil_wait"
    LOCK = "lock"
    IPC_WAIT = "ipc_wait"
    SLEEP = "sleep"
    IO = "io"
    RUNNING = "running"
    SPIN = "spin"
    IDLE = "idle"
    STOPPED = "stopped"
    DEAD = "dead"
    ZOMBIE = "zombie"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


class Role(str, Enum):
    """What a process is to the job."""

    LAUNCHER = "launcher"
    RANK = "rank"
    ENGINE_CORE = "engine_core"
    TOKENIZER = "tokenizer"
    DETOKENIZER = "detokenizer"
    CONTROLLER = "controller"
    COMPILE_WORKER = "compile_worker"
    COMPILER = "compiler"
    RESOURCE_TRACKER = "resource_tracker"
    DATA_WORKER = "data_worker"  # a torch DataLoader worker (comm pt_data_worker): a helper
    MAIN = "main"  # the one process that does the work of a job without ranks
    HELPER = "helper"  # a framework's system process (Ray's raylet, GCS, agents): never a suspect
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


class Severity(str, Enum):
    """How much a verdict or finding matters, most severe first."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        return self.value

    @property
    def order(self) -> int:
        return ("critical", "warning", "info").index(self.value)


class VerdictKind(str, Enum):
    """The diagnosis of the whole job, in the order they are tried."""

    RANK_FAILED = "rank_failed"
    MISMATCHED_COLLECTIVES = "mismatched_collectives"
    MISSING_RANK = "missing_rank"
    STRAGGLER = "straggler"
    LOCK_WAIT = "lock_wait"
    P2P_DEADLOCK = "p2p_deadlock"
    COMPILING = "compiling"
    DEADLOCK = "deadlock"  # a cycle of the wait-for graph
    WAIT_CHAIN = "wait_chain"  # everything waits, transitively, on one thread (the sink)
    LOCAL_DEADLOCK = "local_deadlock"
    ALL_WAITING = "all_waiting"
    PROGRESSING = "progressing"
    IDLE = "idle"  # every process waits for work nobody asked for (a server, no request)
    PAUSED = "paused"  # every process sleeps between phases
    NO_TARGET = "no_target"
    NO_STACKS = "no_stacks"  # py-spy refused (permission) or missing: /proc facts only
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value



#: ``Frame.loop_kind``: a ``for`` over items that end, a ``while``, a ``while`` doing nothing;
#: and no loop at all (the source was read and none of its loops holds the line).
WALK, WHILE, SPIN, NO_LOOP = "walk", "while", "spin", "none"



class cached(cached_property):  # (lower case: a decorator, named as functools' own)
    """``functools.cached_property`` without its lock (Python 3.11 takes an RLock on every
    first read): asked once of each of 131,072 ranks by several stages, the lock was most of
    the cost. The model is frozen and the analysis runs on one thread; two threads racing
    would store the same answer twice. A subclass: ``evolve`` still finds and drops it."""

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)  # type: ignore[index]
        return value

#: How ``Frame.guards`` and ``Frame.branches`` name the ``else`` of an ``if``: "else of TEST
#: (file:line)" (the values that fail the test run it).
ELSE_OF = "else of "


@dataclass(frozen=True)
class Frame:
    """One stack frame; Python and native frames share the type."""

    name: str
    file: str | None = None
    line: int | None = None
    native: bool = False
    module: str | None = None
    # The ``with torch.cuda.graph(...)`` block this Python frame's line is inside, from its
    # source (collect/source.py): "torch.cuda.graph(g) (train.py:151)"; None: not in one.
    capture: str | None = None
    # The rank tests of the ``if`` blocks whose body (or else) holds this Python frame's line,
    # from its source (collect/source.py), outermost first: "trainer.is_global_zero
    # (train.py:23)": only the ranks that pass it run the line.
    guards: tuple[str, ...] = ()
    # The tests of every ``if`` block (body or else) holding this frame's line, whatever they
    # test, outermost first, worded as ``guards`` are ("preds.shape[1] < MAX_NEW
    # (evaluate.py:65)"); the program's own files only.
    branches: tuple[str, ...] = ()
    # The locks of this frame's line, from its source (collect/source.py): the one its
    # statement takes (``with self.lock:``, ``lock.acquire()``), and those held there (the
    # with-blocks and acquire/try/finally-release regions enclosing it, outermost first), as
    # source text: "self.cache_lock".
    takes: str | None = None
    holds: tuple[str, ...] = ()
    # Whether the function gives back what its line takes (a with-block, a try/finally
    # release, a later release() in the same block): a lock or a permit, not a signal that
    # another thread's release() sends.
    releases: bool = False
    # The line is where the program's own loop waits for its next item: a ``for`` header or
    # the first statement of a ``while True:`` body (a worker reading ``for line in
    # conn_file:`` or ``while True: req = conn.recv()`` waits for work, not a reply).
    loop_next: bool = False
    # The loop-only asyncio call of the plain function this line is in, from its source
    # (collect/source.py): "q.put_nowait(item) (server.py:28)" on ``q = asyncio.Queue()``,
    # with no ``call_soon_threadsafe`` there. Run on a thread other than the loop's, it
    # schedules the waiter's wake-up without waking the sleeping loop.
    loop_unsafe: str | None = None
    # The functions its line calls (by last name), read only in a stack that takes a lock: a
    # frame its caller's line does not call was entered without a call (a signal handler).
    calls: tuple[str, ...] = ()
    # The calls of the with-blocks its line is inside, from its source, outermost first:
    # "pool.connection()" (what the call handed the block is held there, as a lock is).
    within: tuple[str, ...] = ()
    # Where in its file the lock its line takes can stay held by code that is not running
    # (collect/parkedlocks.py): a generator's yield inside ``with lock:``, an acquire() an
    # early return leaves unreleased. Read only for a frame that takes a lock.
    parked: tuple[str, ...] = ()
    # The (first, last) lines of the program's own loops that hold its line, outermost first
    # (collect/source.py; a ``python -c`` program's from its command line): a peer running
    # the same code and waiting before a loop this frame is inside has not got as far.
    loops: tuple[tuple[int, int], ...] = ()
    # What the innermost of those loops is (collect/loops.py): "walk" (a ``for`` over items
    # that end: a core burnt on its line computes), "while" (re-checks a condition), "spin" (a
    # ``while`` whose body does nothing: only another thread ends it), "none" (the source was
    # read: no loop of it holds the line); None: unread (a library's, a file not found here).
    loop_kind: str | None = None
    # The frameworks' object gets (``ray.get``: frameworks ``ObjectWait.calls``) that the
    # program's own line calls with no timeout, from its source (collect/source.py): such a get
    # returns only once its objects came, so the line going on past it is news.
    untimed: tuple[str, ...] = ()
    # The lines of the innermost of ``loops`` that call such a get with no timeout, from its
    # source: ``while True: ray.get(c.bump.remote()); time.sleep(0.1)``, caught in the sleep,
    # gives the get's line. A thread sampled inside that get and elsewhere in the loop got its
    # objects, whichever line the dump caught it at.
    loop_gets: tuple[int, ...] = ()
    # The lines of the outermost of ``loops`` that receive a message (a call named recv* or
    # receive*: a zmq socket's, a socket's, a wrapper's such as SGLang's ``recv_requests``),
    # from its source: a stage blocked in a send inside a loop that also reads drains what
    # comes back; one whose loops never read sends all its work before it reads any.
    loop_receives: tuple[int, ...] = ()
    # The methods the program's own line submits through a framework's handle, from its
    # source: ``ray.get(gate.release.remote(who))`` -> ("release",). A waiter there waits for
    # that method, whatever the producer's title says it runs now.
    submits: tuple[str, ...] = ()
    # The methods whose one result a get with no timeout on the program's own line waits for,
    # from its source: ``ray.get(w.setup.remote(addr))`` -> ("setup",); not a get of a list.
    # In a loop over a group's members, such a get asks them one at a time.
    gets_one: tuple[str, ...] = ()
    # The method calls under an ``if`` on the rank that the program's own line comes after in
    # the same loop turn or function, from its source: "fabric.save (train.py:22) under
    # fabric.is_global_zero (train.py:20)". A collective a library runs inside one of them
    # is one the ranks that fail the test never run.
    guarded_before: tuple[str, ...] = ()

    def runs(self, function: str, file_end: str) -> bool:
        """A Python frame of ``function`` (its last dotted part: a method of any class) in a
        file whose path ends ``file_end`` (``"concurrent/futures/_base.py"``)."""
        return (not self.native and self.name.rsplit(".", 1)[-1] == function
                and (self.file or "").endswith(file_end))

    @property
    def short_file(self) -> str | None:
        """The file as a user reads it: the path below site-packages, or the base name."""
        if self.file is None:
            return None
        for marker in LIBRARY_MARKERS[:3]:
            if marker in self.file:
                tail = self.file.split(marker, 1)[1]
                return tail.split("/", 1)[1] if marker == "/lib/python3" and "/" in tail else tail
        return self.file.rsplit("/", 1)[-1]

    @property
    def location(self) -> str:
        """``file:line`` for Python frames, the library for native ones."""
        where = self.short_file or "?"
        if self.native:
            return where
        return f"{where}:{self.line}" if self.line else where


StackKey = tuple[tuple[str, str | None, int | None], ...]
#: (host, PID): one process across nodes (host None: this host, or not known).
ProcessKey = tuple[str | None, int]


def keys_of(pids: Sequence[int], hosts: Sequence[str | None]) -> frozenset[ProcessKey]:
    """(host, PID) pairs of parallel PID and host lists; without hosts, host None."""
    if len(hosts) != len(pids):
        return frozenset((None, pid) for pid in pids)
    return frozenset(zip(hosts, pids, strict=True))


def key_in(key: ProcessKey, keys: frozenset[ProcessKey]) -> bool:
    """``key`` is among ``keys``, where a host of None (an older dump) matches any host."""
    if key in keys or (None, key[1]) in keys:
        return True
    return key[0] is None and any(pid == key[1] for _, pid in keys)

#: /proc state letters (and the sampler's "gone") that say a process will not run again.
GONE_STATES = frozenset({"gone", "X"})
EXITED_STATES = frozenset({"gone", "X", "Z"})
ZOMBIE_STATES = frozenset({"Z", "X"})  # exited, as /proc shows it: not reaped, being reaped
STOPPED_STATES = frozenset({"T", "t"})
#: Categories of a process that is not running at all: exited, a zombie, or stopped.
NOT_RUNNING = frozenset({Category.DEAD, Category.ZOMBIE, Category.STOPPED})


def stack_key_of(frames: Sequence[Frame]) -> StackKey:
    """The Python frames of a stack, innermost first: equal keys are the same Python stack."""
    return tuple((f.name, f.file, f.line) for f in frames if not f.native)


@dataclass(frozen=True)
class Thread:
    """One OS thread, with its stack (innermost frame first) and its classification."""

    tid: int
    name: str | None = None
    state: str | None = None  # /proc task state letter: R S D T Z ...
    wchan: str | None = None
    active: bool | None = None
    owns_gil: bool | None = None
    frames: tuple[Frame, ...] = ()
    python: bool = True  # False: a native-only thread py-spy does not see (from /proc)
    category: Category | None = None
    op: str | None = None
    site: str | None = None
    context: str | None = None  # e.g. "cuda_graph_capture": an outer label over the category
    hint: str | None = None
    helper: bool = False  # an always-there idle helper (watchdog, tqdm monitor, pool reader)
    unchanged_samples: int = 1  # how many consecutive samples showed this same stack
    samples: int = 1
    # Seconds off CPU as sampling began, before py-spy's pause woke it (/proc sched
    # ``se.exec_start``): its stack had not changed for that long. None: unknown (an older
    # dump, a kernel without the file).
    off_cpu_s: float | None = None

    @property
    def stuck(self) -> bool:
        """The stack stayed the same in every sample of the window (needs two or more)."""
        return self.samples > 1 and self.unchanged_samples >= self.samples

    @property
    def stack_key(self) -> StackKey:
        """The Python frames that identify a stack (native addresses differ between samples)."""
        return stack_key_of(self.frames)


@dataclass(frozen=True)
class RankInfo:
    """Rank coordinates of a process; any part may be unknown."""

    global_rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None
    source: str | None = None  # title | env | argv | spawn-order | collectives

    @property
    def key(self) -> int | None:
        """The number that names this rank in groups: global rank, else TP rank."""
        if self.global_rank is not None:
            return self.global_rank
        return self.tp if self.tp is not None else self.local_rank

    @property
    def replicated(self) -> bool:
        """It has a DP or PP coordinate: its rank number alone is shared with other replicas."""
        return self.dp is not None or self.pp is not None



@dataclass(frozen=True)
class Socket:
    """A listening socket held by a process."""

    kind: str  # tcp | tcp6 | unix
    address: str
    port: int | None = None
    inode: int | None = None  # the socket's inode (its fd links: socket:[inode])
    # connections in its accept queue, not accepted yet (sock_diag's rqueue of a listener)
    pending: int = 0


@dataclass(frozen=True)
class GpuProcessUse:
    """What one process holds on one GPU."""

    gpu_index: int
    used_memory: int | None = None  # bytes
    source: str | None = None  # nvml | fd | env


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML sees it (``nvidia-smi --query-gpu=...``)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus: str | None = None
    utilization: float | None = None  # percent, averaged over the window
    utilization_samples: tuple[float, ...] = ()
    memory_used: int | None = None
    memory_total: int | None = None
    temperature: int | None = None
    power_w: float | None = None
    sm_clock_mhz: int | None = None
    retired_pages: int | None = None
    health: tuple[str, ...] = ()


@dataclass(frozen=True)
class Process:
    """One process of the job, read once per sample and merged over the window."""

    pid: int
    ppid: int | None = None
    host: str | None = None
    role: Role = Role.OTHER
    rank: RankInfo | None = None
    title: str | None = None  # cmdline joined: the setproctitle string for titled processes
    cmdline: tuple[str, ...] = ()
    exe: str | None = None
    create_time: float | None = None
    state: str | None = None  # R S D T Z X, or "gone"
    exit_code: int | None = None
    cpu_percent: float | None = None  # over the window
    rss: int | None = None
    vms: int | None = None
    swap: int | None = None
    major_faults: int | None = None
    num_threads: int | None = None
    num_fds: int | None = None
    fd_limit: int | None = None  # its soft RLIMIT_NOFILE: past it, open/socket/accept: EMFILE
    fds: dict[str, int] = field(default_factory=dict)  # kind -> count: file pipe socket dev ...
    log_files: tuple[str, ...] = ()  # regular files open on fd 1/2
    listening: tuple[Socket, ...] = ()
    children: tuple[int, ...] = ()
    environ: dict[str, str] = field(default_factory=dict)  # the job-relevant subset, redacted
    python: bool | None = None
    native_sampled: bool = False
    threads: tuple[Thread, ...] = ()
    working_tid: int | None = None
    gpus: tuple[GpuProcessUse, ...] = ()
    kernel_stack: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    major_faults_window: int | None = None  # major page faults taken during the window
    log_tail: tuple[str, ...] = ()  # last lines of the log file(s) on fd 1/2, redacted
    log_errors: tuple[str, ...] = ()  # error-looking lines of their last 64 KiB, redacted
    log_modified: float | None = None  # when the log file was last written (epoch seconds)
    # PIDs the last lines of its log name ("held by pid 4242") that no process had at the dump
    log_gone_pids: tuple[int, ...] = ()
    # The CUDA kernels cuda-gdb saw running (dump --kernels; None: not asked for this rank).
    kernels: KernelRead | None = None
    # /proc/PID/stat: its process group and its terminal's foreground group (-1: no terminal;
    # a background group that reads its terminal is stopped by SIGTTIN), and where its stack
    # starts (the same address as its parent's in a fork without exec, where ASLR gives an
    # exec'd program another).
    pgrp: int | None = None
    terminal_pgrp: int | None = None
    stack_start: int | None = None
    tracer: int | None = None  # status TracerPid: who ptrace-attached it (a debugger, a sampler)
    # Signals sent to it that none of its threads can take (pending, blocked by every one:
    # never delivered), and the ending signals it ignores (SIG_IGN) or catches (a handler of
    # its own, or one inherited through fork), from /proc status.
    signals_blocked: tuple[str, ...] = ()
    signals_ignored: tuple[str, ...] = ()
    signals_caught: tuple[str, ...] = ()

    # Cached (in the instance dict, which equality and serialisation never read): each is
    # asked about every rank many times over, 131,072 ranks in a merged job. A Process is
    # frozen, so the answer cannot go stale; ``dataclasses.replace`` builds a new one.
    @cached
    def key(self) -> ProcessKey:
        """(host, PID): what names one process across nodes, where PIDs repeat."""
        return (self.host, self.pid)

    @cached
    def working_thread(self) -> Thread | None:
        for thread in self.threads:
            if thread.tid == self.working_tid:
                return thread
        return None

    @property
    def is_gone(self) -> bool:
        """The process no longer exists (it exited and was reaped, or vanished mid-sample)."""
        return self.state in GONE_STATES

    @cached  # asked of every rank by a dozen patterns and checks: read once
    def is_exited(self) -> bool:
        """Gone, or a zombie waiting to be reaped: either way it will not run again."""
        return self.state in EXITED_STATES

    @property
    def is_zombie(self) -> bool:
        """/proc showed it exited: Z (not reaped yet) or X (being reaped)."""
        return self.state in ZOMBIE_STATES

    @property
    def vanished(self) -> bool:
        """It disappeared between two of hangscope's own reads (the sampler's ``gone``)."""
        return self.state == "gone"

    @property
    def ended_while_read(self) -> bool:
        """It exited during the dump: gone between two reads, or a zombie whose stack a round
        read (it was alive then)."""
        return self.vanished or (self.is_zombie and any(t.frames for t in self.threads))

    @property
    def is_stopped(self) -> bool:
        """Stopped by a signal or a tracer (state T or t)."""
        return self.state in STOPPED_STATES

    @cached
    def category(self) -> Category:
        """Where the process is: its state when exited or stopped, else its working thread's."""
        return category_of(self, self.working_thread)

    @property
    def is_rank_numbered(self) -> bool:
        """The process has a rank number (else reports name it by PID)."""
        return self.rank is not None and self.rank.key is not None

    @property
    def name(self) -> str:
        """A short name for tables: rank label, else role."""
        if self.rank is not None and self.role in (Role.RANK, Role.ENGINE_CORE):
            return f"rank {self.rank.key}" if self.rank.key is not None else str(self.role)
        return str(self.role)


@dataclass(frozen=True)
class Host:
    name: str
    kernel: str | None = None
    cpus: int | None = None
    mem_total: int | None = None
    mem_available: int | None = None
    swap_used: int | None = None
    cgroup_memory_limit: int | None = None
    gpus: tuple[Gpu, ...] = ()
    swap_total: int | None = None  # 0: the machine has no swap (paging is file I/O)
    gpu_error: str | None = None  # "no NVIDIA driver", ... : said once, not per rank
    listening_ports: tuple[int, ...] = ()  # every TCP port listened on, by any process
    kernel_messages: tuple[str, ...] = ()  # "ISO-TIME text": OOM kills, Xids... about the job


@dataclass(frozen=True)
class Job:
    launcher: int | None = None
    target: int | None = None  # the PID the user gave
    kind: str = "unknown"  # sglang | vllm | torchrun | deepspeed | ray | mp | python | unknown
    expected_ranks: int | None = None
    expected_source: str | None = None  # "--tp-size 8", "WORLD_SIZE=4", ...
    args: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    """Ranks whose working threads share one signature."""

    signature: str
    category: Category
    op: str | None
    site: str | None
    ranks: tuple[int, ...]
    pids: tuple[int, ...]
    context: str | None = None
    # Rank labels ("DP1·TP1"), in ``ranks`` order, where ranks of different DP replicas or PP
    # stages share a number; empty where the numbers alone name each rank.
    labels: tuple[str, ...] = ()
    # The host of each of ``pids`` (same order): PIDs repeat across nodes. Empty in dumps
    # older than it; then a PID names the process on any host.
    hosts: tuple[str | None, ...] = ()

    @cached  # a group of 131,072 ranks: the verdict rules ask it several times
    def keys(self) -> frozenset[ProcessKey]:
        """(host, PID) of every member."""
        return keys_of(self.pids, self.hosts)

    @property
    def first_key(self) -> ProcessKey:
        """(host, PID) of the member whose stack stands for the group."""
        return (self.hosts[0] if len(self.hosts) == len(self.pids) else None, self.pids[0])


@dataclass(frozen=True)
class TreeNode:
    """A node of the merged call tree: one frame and the ranks that pass through it."""

    frame: str
    ranks: tuple[int, ...]
    children: tuple[TreeNode, ...] = ()


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    severity: Severity
    summary: str
    suspects: tuple[int, ...] = ()  # PIDs
    evidence: tuple[str, ...] = ()
    # The host of each suspect PID (same order): on several nodes a PID alone names one
    # process per node. Empty in older dumps; then a suspect PID matches it on any host.
    suspect_hosts: tuple[str | None, ...] = ()

    @property
    def suspect_keys(self) -> frozenset[ProcessKey]:
        """(host, PID) of each suspect; host None where the verdict did not say."""
        return keys_of(self.suspects, self.suspect_hosts)

    def is_suspect(self, proc: Process) -> bool:
        """The process is one of the suspects (by host and PID, or by PID in older dumps)."""
        return key_in(proc.key, self.suspect_keys)

    def holds_suspect(self, group: Group) -> bool:
        """Some member of the group is a suspect."""
        keys = self.suspect_keys
        return bool(keys) and any(key_in(k, keys) for k in group.keys)


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    message: str
    evidence: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Readings:
    """What the collectors read on one node for the analysis to judge: raw, no conclusions.

    ``analyze(snapshot)`` derives ``Snapshot.collectives`` and ``Snapshot.progress`` from these
    (in ``dump``, ``merge`` and the fixture regenerator alike); a dump without them (older
    versions) keeps the conclusions it stored.
    """

    host: str | None = None  # the node read (a merged job has one Readings per node)
    ras: RasReading | None = None  # NCCL RAS's answer (None: not asked)
    flight_recorder: FrReading | None = None  # the Flight Recorder dumps read
    progress: ProgressEvidence | None = None  # the watcher's window (None: not watched)


@dataclass(frozen=True)
class Snapshot:
    """Everything hangscope knows about a job at one moment; the JSON contract."""

    created: str
    hangscope: str
    hosts: tuple[Host, ...]
    job: Job
    processes: tuple[Process, ...]
    samples: int = 1
    window_s: float = 0.0
    duration_s: float | None = None  # how long the sampling took
    groups: tuple[Group, ...] = ()
    call_tree: tuple[TreeNode, ...] = ()
    verdict: Verdict | None = None
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()  # said once for the whole job: "no NVIDIA driver", ...
    redacted: bool = True
    # NCCL RAS / Flight Recorder evidence, one item per node read (``merge`` keeps each).
    collectives: tuple[CollectiveEvidence, ...] = ()
    # Progressing / stuck / slow per watched process, measured over the window (None: not
    # watched: --no-progress, an old dump, a merged multi-node job without it).
    progress: JobProgress | None = None
    # /proc/locks of the job and py-spy --locals of its lock and p2p waiters (None: not read).
    waits: WaitEvidence | None = None
    # The raw readings the conclusions above are derived from, one per node (empty: an older
    # dump, whose stored conclusions stand).
    readings: tuple[Readings, ...] = ()
    # Who waits for whom (analyze/graph/waitgraph.py, from ``waits`` and the stacks; None: not
    # built).
    wait_graph: WaitGraph | None = None
    schema: str = SCHEMA

    def process(self, pid: int, host: str | None = None) -> Process | None:
        """The process with this PID (on this host, where given)."""
        for proc in self.processes:
            if proc.pid == pid and (host is None or proc.host == host):
                return proc
        return None

    def find(self, key: ProcessKey) -> Process | None:
        """The process with this (host, PID); host None: the PID on any host."""
        return self.process(key[1], key[0])

    @property
    def host_names(self) -> tuple[str, ...]:
        """The hosts the processes were read on, in process order (several: a merged job)."""
        return tuple(dict.fromkeys(p.host for p in self.processes if p.host))

    @property
    def suspect_processes(self) -> tuple[Process, ...]:
        """The processes the verdict suspects, in process order."""
        verdict = self.verdict
        if verdict is None or not verdict.suspects:
            return ()
        return tuple(p for p in self.processes if verdict.is_suspect(p))

    def host_of(self, proc: Process) -> Host | None:
        """The host ``proc`` runs on (its listening ports, its CPUs), where it was read."""
        return next((h for h in self.hosts if h.name == proc.host), None)

    # Cached as on Process: every stage of the analysis asks, over 131,072 ranks.
    @cached
    def subjects(self) -> tuple[Process, ...]:
        """The processes the verdict is about (see :func:`subjects_of`)."""
        return subjects_of(self.processes, self.of_roles)

    @cached
    def by_role(self) -> dict[Role, tuple[Process, ...]]:
        """The processes of each role, in process order, sorted out in one pass: the rules,
        patterns and checks that ask for a job's launchers or helpers read those, not each
        of 131,072 ranks (``of_roles``)."""
        roles: dict[Role, list[Process]] = {}
        last: Role | None = None
        members: list[Process] = []
        for p in self.processes:
            role = p.role
            if role is not last:  # (a job's ranks come together: one lookup per run)
                members = roles.setdefault(role, [])
                last = role
            members.append(p)
        return {role: tuple(procs) for role, procs in roles.items()}

    def of_roles(self, *roles: Role) -> tuple[Process, ...]:
        """The processes whose role is one of ``roles``, in process order."""
        by_role = self.by_role
        found = [procs for role in dict.fromkeys(roles) if (procs := by_role.get(role))]
        if len(found) < 2:
            return found[0] if found else ()
        return tuple(p for p in self.processes if p.role in roles)  # (several: their order)

    @property
    def gpus(self) -> dict[int, Gpu]:
        """Every GPU NVML read, by index, over all hosts."""
        return {g.index: g for host in self.hosts for g in host.gpus}

    @property
    def all_exited(self) -> bool:
        """No process of the job is left alive."""
        return all(p.is_exited for p in self.processes)

    @cached
    def rank_processes(self) -> tuple[Process, ...]:
        """The processes whose role is rank, in process order: what "ranks 3/4" counts."""
        return self.of_roles(Role.RANK)

    @property
    def ranks(self) -> tuple[Process, ...]:
        """Processes that are ranks (or the lone target when nothing else is)."""
        ranked = tuple(p for p in self.processes if p.role in (Role.RANK,))
        if ranked:
            return tuple(sorted(ranked, key=_rank_sort_key))
        engines = tuple(p for p in self.processes if p.role is Role.ENGINE_CORE)
        return engines


def category_of(proc: Process, working: Thread | None) -> Category:
    """:attr:`Process.category` when the caller already holds the working thread.

    (The scan for the working thread then runs once per process, not once per question,
    over 131,072 ranks.)
    """
    state = proc.state
    if state in GONE_STATES:
        return Category.DEAD
    if state == "Z":
        return Category.ZOMBIE
    if state in STOPPED_STATES:
        return Category.STOPPED
    if working is None or working.category is None:
        return Category.UNKNOWN
    return working.category


#: Roles that are never what a diagnosis is about while another process is.
_NOT_SUBJECTS = frozenset({Role.LAUNCHER, Role.RESOURCE_TRACKER, Role.HELPER})


def subjects_of(processes: Sequence[Process], of_roles: Callable[..., tuple[Process, ...]]
                | None = None) -> tuple[Process, ...]:
    """What a diagnosis is about: ranks, else the main process, else engine cores, else every
    Python process.

    ``of_roles``: the processes of some roles in order (``Snapshot.of_roles``, its index
    built once), where the caller has one; else each is a scan of ``processes``.
    """
    if of_roles is None:
        def of_roles(*roles: Role) -> tuple[Process, ...]:
            return tuple(p for p in processes if p.role in roles)
    # The ranks, where there are any: a main process beside them (a Ray driver whose Ray
    # Train workers are the ranks) hands out their work and waits for it.
    ranks = of_roles(Role.RANK) or of_roles(Role.MAIN)
    if ranks:
        return ranks
    engines = of_roles(Role.ENGINE_CORE)
    if engines:
        return engines
    # (multiprocessing's resource tracker and the other helpers serve the job: not what it is)
    workers = tuple(p for p in processes if p.role not in _NOT_SUBJECTS and p.threads)
    if workers:
        return workers
    return tuple(p for p in processes if p.threads) or tuple(processes)


Signature = tuple[str, Category, str | None, str | None, str | None]


def signature_of(proc: Process) -> Signature:
    """(signature text, category, op, site, context) of a process's working thread."""
    working = proc.working_thread
    category = category_of(proc, working)
    op = working.op if working else None
    site = working.site if working else None
    context = working.context if working else None
    if category in NOT_RUNNING:
        op = site = context = None
    parts = [str(category)]
    if op:
        parts.append(op)
    if site:
        parts.append(f"at {site}")
    if context:
        parts.append(f"[{context}]")
    return " ".join(parts), category, op, site, context


def _rank_sort_key(proc: Process) -> tuple[int, int]:
    key = proc.rank.key if proc.rank is not None else None
    return (key if key is not None else 1 << 30, proc.pid)


def rank_id(proc: Process) -> int:
    """The number shown for a process in rank sets: its rank, else its PID."""
    rank = proc.rank
    key = rank.key if rank is not None else None
    return proc.pid if key is None else key
