"""Kernel facts from /proc: ``cat /proc/PID/{status,wchan,stack,environ}``, ``ls -l /proc/PID/fd``.

The only module that reads /proc for per-process facts. Every read tolerates the process
vanishing or a permission refusal: a missing fact is ``None``, never an exception.
Why one file: every /proc parser in one place, so a field is read one way (one stat parser
with named fields, one fd reader), and a new fact finds the reader it extends.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import platform
import signal
import socket
import stat as stat_mod
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from hangscope.collect.liveenv import LIBC_NAMES, environ_at, environ_offset
from hangscope.collect.locks import parse_proc_locks
from hangscope.model import Socket
from hangscope.model.waits import (
    FILE_WATCHES,
    SYSCALLS,
    FdRecord,
    FileLockRecord,
    KernelWaits,
    ProcessFds,
    TaskSyscall,
    TcpConnection,
    UnixPeer,
)

PROC = Path("/proc")

# The environment variables that a finding, a verdict or a collector reads; the rest of the
# environment (tokens, keys, knobs nothing reads) is neither kept nor shown. A name is added
# here only together with the code that uses it.
JOB_ENV_KEYS = (
    # rank coordinates: torchrun/torchelastic, MPI, Slurm, PMI, Horovod, SGLang (analyze.roles)
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
    "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "PMI_RANK",
    "PMI_SIZE", "CROSS_RANK", "LOCAL_SIZE", "SGLANG_DP_RANK",
    # which GPU a rank drives (collect.nvml)
    "CUDA_VISIBLE_DEVICES",
    # NCCL RAS (collect.ras) and the Flight Recorder (collect.flightrec)
    "NCCL_RAS_ADDR", "NCCL_RAS_ENABLE", "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
    "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE",
    # a GPU core dump on request (analyze/findings/cuda.py says how; hangscope never asks)
    "CUDA_ENABLE_USER_TRIGGERED_COREDUMP", "CUDA_COREDUMP_PIPE", "CUDA_COREDUMP_FILE",
)


@dataclass(frozen=True)
class TaskInfo:
    """One thread's kernel view: ``/proc/PID/task/TID/{comm,stat,wchan}``."""

    tid: int
    comm: str | None
    state: str | None
    wchan: str | None
    utime: int = 0  # clock ticks: a moving count means the thread runs
    stime: int = 0
    # ``schedstat``: (ns on CPU, times scheduled in, ns runnable on a run queue). Unchanged
    # between two reads of a thread that sleeps in both: it did not run in between, so its
    # stack is the same (None: unknown).
    sched: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class ProcInfo:
    """Per-process facts read in one pass."""

    pid: int
    exists: bool = True
    permission_denied: bool = False
    state: str | None = None
    ppid: int | None = None
    threads: int | None = None
    rss: int | None = None
    vms: int | None = None
    swap: int | None = None
    major_faults: int | None = None
    tasks: tuple[TaskInfo, ...] = ()
    fds: dict[str, int] = field(default_factory=dict)
    num_fds: int | None = None
    fd_limit: int | None = None  # RLIMIT_NOFILE, soft (/proc/PID/limits "Max open files")
    fd_targets: tuple[str, ...] = ()
    log_files: tuple[str, ...] = ()
    socket_inodes: frozenset[int] = frozenset()
    kernel_stack: tuple[str, ...] = ()
    cpu_ticks: int | None = None  # utime + stime of the whole process, clock ticks
    pgrp: int | None = None  # its process group, and its terminal's foreground group (-1:
    terminal_pgrp: int | None = None  # no terminal): a background group reading it is stopped
    stack_start: int | None = None  # /proc/PID/stat startstack: equal in a fork without exec
    tracer: int | None = None  # status TracerPid: the process that ptrace-attached it
    # Signals sent to it that no thread can take (pending, blocked by every thread), and the
    # ending signals it ignores or catches (status ShdPnd/SigPnd, SigBlk per thread, SigIgn,
    # SigCgt).
    signals_blocked: tuple[str, ...] = ()
    signals_ignored: tuple[str, ...] = ()
    signals_caught: tuple[str, ...] = ()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    except PermissionError:
        return None
    except OSError:
        return None


def read_cmdline(pid: int) -> tuple[str, ...]:
    """``cat /proc/PID/cmdline``: argv, or the setproctitle string as one element."""
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return ()
    parts = raw.split(b"\0")
    # setproctitle pads the argv area with NULs: drop the empty tail it leaves.
    while parts and parts[-1] == b"":
        parts = parts[:-1]
    return tuple(p.decode(errors="replace") for p in parts)


#: How a process's environment names its rank. A process started without one may set it
#: itself (``os.environ["RANK"] = ...`` in an ``mp.spawn`` or ``mp.Process`` worker): only its
#: live environment has it then.
_RANK_ENTRIES = (b"RANK=", b"LOCAL_RANK=", b"OMPI_COMM_WORLD_RANK=", b"PMI_RANK=",
                 b"SLURM_PROCID=")


def read_environ(pid: int, keys: tuple[str, ...] = JOB_ENV_KEYS,
                 live: bool = True) -> dict[str, str] | None:
    """The job-relevant part of ``/proc/PID/environ`` (the environment at exec time), or of
    the live environment (collect/liveenv.py) where a process title overwrote it or where it
    names no rank (a worker may set its own); ``live=False`` (a process in state D, whose
    memory a read could wait on) reads only the first.

    Returns None when it cannot be read (another user's process without privilege).
    """
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    titled = raw and b"=" not in raw  # a process title was written over it (setproctitle)
    if live and (titled or not any(item.startswith(_RANK_ENTRIES) for item in raw.split(b"\0"))):
        now = _live_environ(pid)
        raw = now if now and b"=" in now else raw
    wanted = set(keys)
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key.decode(errors="replace") in wanted:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _live_environ(pid: int) -> bytes | None:
    """The environment libc's ``__environ`` points to now (collect/liveenv.py): the libc
    mapped at offset 0 in /proc/PID/maps, opened through the process's root (a container),
    its symbol's address read through /proc/PID/mem."""
    for line in (_read(PROC / str(pid) / "maps") or "").splitlines():
        cols = line.split(None, 5)
        if len(cols) < 6 or int(cols[2], 16) != 0 or not os.path.basename(
                cols[5]).startswith(LIBC_NAMES):
            continue
        offset = environ_offset(f"{PROC}/{pid}/root{cols[5]}")
        if offset is None:
            return None
        try:
            with open(f"{PROC}/{pid}/mem", "rb", buffering=0) as mem:
                return environ_at(mem, int(cols[0].split("-")[0], 16) + offset)
        except OSError:
            return None
    return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of ``/proc/PID/stat`` (proc(5)) that hangscope reads, by name.

    The one parser of that line: comm may hold spaces and parentheses, so fields are counted
    from the last ``)``.
    """

    pid: int
    comm: str
    state: str  # field 3: R S D T t Z X ...
    ppid: int  # field 4
    majflt: int  # field 12
    utime: int  # field 14, clock ticks
    stime: int  # field 15
    start_ticks: int  # field 22: clock ticks after boot
    vsize: int  # field 23, bytes
    exit_status: int | None  # field 52: the raw wait status of an exited task (Linux >= 3.5)
    pgrp: int = 0  # field 5: process group (a shell job)
    session: int = 0  # field 6: session id
    processor: int | None = None  # field 39: the CPU the task last ran on
    tpgid: int = -1  # field 8: the foreground process group of its terminal (-1: none)
    start_stack: int = 0  # field 28: where its stack starts (0 without ptrace access)

    @property
    def cpu_ticks(self) -> int:
        return self.utime + self.stime

    def create_time(self, boot: float) -> float:
        """Start time in seconds since the epoch, as psutil's ``create_time()`` says it."""
        return float(self.start_ticks) / CLOCK_TICKS + boot


def parse_stat(pid: int, text: str) -> Stat | None:
    """One ``/proc/PID/stat`` (or ``/proc/PID/task/TID/stat``) line; None when malformed."""
    head, _, tail = text.rpartition(")")
    rest = tail.split()
    if len(rest) < 21:
        return None
    try:
        return Stat(pid=pid, comm=head[head.find("(") + 1:].strip(), state=rest[0],
                    ppid=int(rest[1]), majflt=int(rest[9]), utime=int(rest[11]),
                    stime=int(rest[12]), start_ticks=int(rest[19]), vsize=int(rest[20]),
                    exit_status=int(rest[49]) if len(rest) > 49 else None,
                    pgrp=int(rest[2]), session=int(rest[3]),
                    processor=int(rest[36]) if len(rest) > 36 else None,
                    tpgid=int(rest[5]), start_stack=int(rest[25]) if len(rest) > 25 else 0)
    except ValueError:
        return None


def read_stat(pid: int) -> Stat | None:
    """``/proc/PID/stat``; None when the process is gone or the line unreadable."""
    text = _cat(f"{PROC}/{pid}/stat")
    return parse_stat(pid, text) if text is not None else None


_boot: tuple[float, float] = (-1.0, 0.0)  # (monotonic time read, psutil.boot_time())


def boot_time() -> float:
    """``psutil.boot_time()``, read again at most once a second (it moves only when the wall
    clock is stepped)."""
    global _boot
    now = time.monotonic()
    if now - _boot[0] > 1.0:
        _boot = (now, psutil.boot_time())
    return _boot[1]


def seconds_alive() -> float:
    """Seconds since this process started: its start time in /proc/self/stat against the
    boot clock (the kernel's 10 ms tick; 0.0 where unreadable)."""
    text = _cat(f"{PROC}/self/stat")
    try:
        ticks = int((text or "").rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return 0.0
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / CLOCK_TICKS)


def start_time(pid: int) -> float | None:
    """When ``pid`` started (psutil's ``create_time()``), from one read of its stat line.

    Run for every process before and after every py-spy run: a psutil.Process costs ten
    times this read. None: gone."""
    found = read_stat(pid)
    return None if found is None else found.create_time(boot_time())


def _cat(path: str) -> str | None:
    """``_read`` without pathlib or a file object: these reads run for every thread of every
    rank, each tick, on a pool's threads. Each syscall gives the GIL away, and while another
    thread computes, getting it back waits up to the switch interval (5 ms): a text-mode
    ``open`` makes seven (open, fstat, ioctl, lseek, two reads, close) and such a convoy made
    the reads of a cold dump of 8 CUDA ranks 3x its py-spy time (docs/performance-gpu.md);
    here four (a seq_file hands out about a page per read: read until it says the end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _sched(text: str | None) -> tuple[int, int, int] | None:
    parts = (text or "").split()
    if len(parts) < 3 or not all(part.isdigit() for part in parts[:3]):
        return None
    return int(parts[0]), int(parts[2]), int(parts[1])


def read_tasks(pid: int, wchan: bool = True) -> tuple[TaskInfo, ...]:
    """Every thread's state, wchan and scheduling counters: ``/proc/PID/task/*/{stat,wchan}``.

    ``wchan=False``: states and counters only (whether a thread ran between two reads).
    """
    base = f"{PROC}/{pid}/task"
    try:
        tids = sorted(int(t) for t in os.listdir(base) if t.isdigit())
    except OSError:
        return ()
    tasks = []
    for tid in tids:
        tdir = f"{base}/{tid}"
        stat_text = _cat(f"{tdir}/stat")
        if stat_text is None:
            continue  # the thread ended between listing and reading
        parsed = parse_stat(tid, stat_text)
        channel = _cat(f"{tdir}/wchan") if wchan else None
        # comm is the "(...)" of stat (what /proc/TID/comm holds): one read less per thread.
        tasks.append(
            TaskInfo(
                tid=tid,
                comm=(parsed.comm or None) if parsed else None,
                state=parsed.state if parsed else None,
                wchan=channel.strip() if channel and channel.strip() not in ("", "0") else None,
                utime=parsed.utime if parsed else 0,
                stime=parsed.stime if parsed else 0,
                sched=_sched(_cat(f"{tdir}/schedstat")),
            )
        )
    return tuple(tasks)


def exec_start_ms(text: str | None) -> float | None:
    """``se.exec_start`` of a ``/proc/PID/task/TID/sched`` text: when the thread last ran, in
    ms of the scheduler clock of the CPU it ran on; None when absent or malformed (a kernel
    without CONFIG_SCHED_DEBUG has no such file)."""
    at = text.find("se.exec_start") if text else -1
    if at < 0:
        return None
    end = text.find("\n", at)
    try:
        value = float(text[at:end if end >= 0 else len(text)].rpartition(":")[2])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_off_cpu(pid: int) -> dict[int, float]:
    """Seconds each thread has been off CPU: ``/proc/PID/task/TID/sched`` ``se.exec_start``
    (when it last ran) against this reader's own ``/proc/thread-self/sched`` read on the same
    CPU. Each CPU's scheduler clock (``rq_clock_task``) leaves out the IRQ and steal time that
    CPU saw since boot, so two CPUs' clocks differ by seconds after hours of uptime (8.8 s on
    a 12 h VM): the reader moves itself onto each CPU the threads last ran on, reads its own
    clock there (one move per CPU, its affinity restored after; each reading serves every
    process read in the next :data:`CPU_CLOCK_TTL_S`). Threads whose time is unknown
    (no sched file, a time of 0, a CPU the reader may not run on) are left out.
    """
    base = f"{PROC}/{pid}/task"
    if not os.path.exists(f"{PROC}/thread-self/sched"):
        return {}  # a kernel without CONFIG_SCHED_DEBUG
    try:
        tids = [int(t) for t in os.listdir(base) if t.isdigit()]
        mask = os.sched_getaffinity(0)
    except OSError:
        return {}
    # The thread's time first, then its CPU (a move resets the time to 0 until it runs on
    # the new CPU, so the two agree unless it ran in the microseconds between the reads).
    by_cpu: dict[int, list[tuple[int, float]]] = {}
    for tid in tids:
        last = exec_start_ms(_cat(f"{base}/{tid}/sched"))
        if last is None or last <= 0:
            continue  # gone, unreadable, or 0: moved to another CPU and not run there since
        text = _cat(f"{base}/{tid}/stat")
        parsed = parse_stat(tid, text) if text is not None else None
        if parsed is not None and parsed.processor in mask:
            by_cpu.setdefault(parsed.processor, []).append((tid, last))
    clocks = _cpu_clocks(sorted(by_cpu), mask)
    return {tid: max(0.0, (clocks[cpu] - last) / 1000.0)
            for cpu, on_cpu in by_cpu.items() if cpu in clocks for tid, last in on_cpu}


#: How long a CPU's scheduler clock, read by moving onto that CPU, serves later reads. The
#: first round reads every rank at once, and each reader moved onto each CPU its rank's
#: threads last ran on: 9 readers x 16 CPUs that py-spy kept busy, each move waiting for a
#: slot there (0.07 s of a cold dump of 8 CUDA ranks, docs/performance-gpu.md). A clock read
#: earlier understates an off-CPU time by at most its age, never overstates it: a thread that
#: ran since reads 0.
CPU_CLOCK_TTL_S = 0.25
_clocks: dict[int, tuple[float, float]] = {}  # CPU -> (its clock in ms, monotonic time read)
_clocks_lock = threading.Lock()


def _cpu_clocks(cpus: list[int], mask: set[int]) -> dict[int, float]:
    """Each CPU's scheduler clock in ms (``se.exec_start`` of this reader's own thread, read
    on that CPU), read again where older than :data:`CPU_CLOCK_TTL_S`; one reader at a time
    (the others wait and take its readings). The affinity is ``mask`` again after."""
    with _clocks_lock:
        now = time.monotonic()
        stale = [cpu for cpu in cpus if now - _clocks.get(cpu, (0.0, -CPU_CLOCK_TTL_S))[1]
                 > CPU_CLOCK_TTL_S]
        try:
            for cpu in stale:
                try:
                    os.sched_setaffinity(0, {cpu})
                except OSError:
                    continue
                clock = exec_start_ms(_cat(f"{PROC}/thread-self/sched"))
                if clock is None:
                    break
                _clocks[cpu] = (clock, time.monotonic())
        finally:
            if stale:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, mask)
        return {cpu: _clocks[cpu][0] for cpu in cpus if cpu in _clocks}


def scan() -> dict[int, Stat]:
    """``ps -eo pid,ppid,stat,lstart``: one pass over ``/proc/*/stat`` for the whole machine.

    Discovery reads parent links from this one pass instead of walking /proc once per process.
    """
    out: dict[int, Stat] = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        found = read_stat(int(name))
        if found is not None:
            out[found.pid] = found
    return out


def _fd_kind(target: str) -> str:
    if target.startswith("socket:"):
        return "socket"
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("anon_inode:"):
        return target.split(":", 1)[1].strip("[]")
    if target.startswith("/dev/nvidia"):
        return "nvidia"
    if target.startswith("/dev/"):
        return "device"
    return "file"


def read_fds(pid: int) -> tuple[int | None, dict[str, int], tuple[str, ...], tuple[str, ...],
                                 frozenset[int], bool]:
    """``ls -l /proc/PID/fd``: count by kind, targets, log files on fd 1/2, socket inodes."""
    base = f"{PROC}/{pid}/fd"
    try:
        names = os.listdir(base)
    except PermissionError:
        return None, {}, (), (), frozenset(), True
    except OSError:
        return None, {}, (), (), frozenset(), False
    kinds: Counter[str] = Counter()
    targets = []
    logs = []
    inodes = set()
    for name in names:
        try:
            target = os.readlink(f"{base}/{name}")
        except OSError:
            continue
        targets.append(target)
        kind = _fd_kind(target)
        kinds[kind] += 1
        if kind == "socket":
            with contextlib.suppress(ValueError):
                inodes.add(int(target[len("socket:["):-1]))
        if name in ("1", "2") and kind == "file" and target.startswith("/"):
            try:
                if stat_mod.S_ISREG(os.stat(f"{base}/{name}").st_mode) and target not in logs:
                    logs.append(target)
            except OSError:
                pass
    return len(names), dict(kinds), tuple(targets), tuple(logs), frozenset(inodes), False


#: Signals sent to end or steer a process: ignoring one is worth saying when a parent waits for
#: its child's exit (SIGINT, SIGQUIT and SIGHUP are ignored by every background shell job and
#: nohup: no news).
ENDING_SIGNALS = ("SIGTERM", "SIGUSR1", "SIGUSR2")


def _mask(status: dict[str, str], key: str) -> int:
    try:
        return int(status.get(key, "0"), 16)
    except ValueError:
        return 0


def signal_names(mask: int) -> tuple[str, ...]:
    """``("SIGTERM",)`` for bit 14 (signal 15) of a /proc status signal mask."""
    out = []
    for number in range(1, 65):
        if mask >> (number - 1) & 1:
            try:
                out.append(signal.Signals(number).name)
            except ValueError:
                out.append(f"signal {number}")
    return tuple(out)


def _blocked_signals(pid: int, status: dict[str, str]) -> tuple[str, ...]:
    """Signals pending for the process (ShdPnd) or its main thread (SigPnd) that every one of
    its threads blocks: sent, and never delivered. The threads are read only when one is
    pending (it rarely is: delivery takes microseconds)."""
    pending = _mask(status, "ShdPnd") | _mask(status, "SigPnd")
    if not pending:
        return ()
    blocked = _mask(status, "SigBlk")
    try:
        tids = os.listdir(PROC / str(pid) / "task")
    except OSError:
        tids = []
    for tid in tids:
        if tid != str(pid) and (task := _status_at(f"{PROC}/{pid}/task/{tid}")):
            blocked &= _mask(task, "SigBlk")
    return signal_names(pending & blocked)


def _tracer(status: dict[str, str] | None) -> int | None:
    value = (status or {}).get("TracerPid", "0")
    return int(value) if value.isdigit() and value != "0" else None


def tracer_of(pid: int) -> int | None:
    """The PID that ptrace-attached ``pid`` (status ``TracerPid``; None: none, or gone)."""
    return _tracer(read_status(pid))


def read_status(pid: int) -> dict[str, str] | None:
    """``cat /proc/PID/status`` as a dict."""
    return _status_at(f"{PROC}/{pid}")


def _status_at(base: str) -> dict[str, str] | None:
    text = _cat(f"{base}/status")
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key] = value.strip()
    return out


def _kb(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value.split()[0]) * 1024
    except (ValueError, IndexError):
        return None


def read_fd_limit(pid: int) -> int | None:
    """The soft RLIMIT_NOFILE of ``pid`` (``Max open files`` of /proc/PID/limits): the fd
    number past which open(), socket() and accept() fail with EMFILE; None: unread or
    unlimited."""
    for line in (_cat(f"{PROC}/{pid}/limits") or "").splitlines():
        if line.startswith("Max open files"):
            soft = line[len("Max open files"):].split()[:1]
            return int(soft[0]) if soft and soft[0].isdigit() else None
    return None


def read_process(pid: int, with_fds: bool = True,
                 tasks: tuple[TaskInfo, ...] | None = None) -> ProcInfo:
    """Read one process's /proc facts in one pass; a vanished process gives exists=False.

    ``tasks``: its threads as ``read_tasks`` just read them (not read twice).
    """
    status = read_status(pid)
    if status is None:
        return ProcInfo(pid=pid, exists=(PROC / str(pid)).exists())
    parsed = read_stat(pid)
    state = status.get("State", "?")[:1] or None
    if with_fds:
        num_fds, kinds, targets, logs, inodes, denied = read_fds(pid)
    else:
        num_fds, kinds, targets, logs, inodes, denied = None, {}, (), (), frozenset(), False
    kstack = _cat(f"{PROC}/{pid}/stack")
    return ProcInfo(
        pid=pid,
        permission_denied=denied,
        state=state,
        ppid=int(status["PPid"]) if status.get("PPid", "").isdigit() else None,
        threads=int(status["Threads"]) if status.get("Threads", "").isdigit() else None,
        rss=_kb(status.get("VmRSS")),
        vms=_kb(status.get("VmSize")),
        swap=_kb(status.get("VmSwap")),
        major_faults=parsed.majflt if parsed else None,
        tasks=read_tasks(pid) if tasks is None else tasks,
        fds=kinds,
        num_fds=num_fds,
        fd_limit=read_fd_limit(pid) if with_fds else None,
        fd_targets=targets,
        log_files=logs,
        socket_inodes=inodes,
        kernel_stack=tuple(
            line.split("] ", 1)[-1] for line in (kstack or "").splitlines() if line.strip()
        ),
        cpu_ticks=parsed.cpu_ticks if parsed else None,
        pgrp=parsed.pgrp if parsed else None,
        terminal_pgrp=parsed.tpgid if parsed else None,
        stack_start=parsed.start_stack or None if parsed else None,
        tracer=_tracer(status),
        signals_blocked=_blocked_signals(pid, status),
        signals_ignored=tuple(n for n in signal_names(_mask(status, "SigIgn"))
                              if n in ENDING_SIGNALS),
        signals_caught=tuple(n for n in signal_names(_mask(status, "SigCgt"))
                             if n in ENDING_SIGNALS),
    )


def _hex_addr_v4(hexaddr: str) -> str:
    raw = bytes.fromhex(hexaddr)
    return ".".join(str(b) for b in reversed(raw))


def _hex_addr_v6(hexaddr: str) -> str:
    raw = bytes.fromhex(hexaddr)
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
    flat = b"".join(words)
    groups = [flat[i:i + 2].hex() for i in range(0, 16, 2)]
    text = ":".join(g.lstrip("0") or "0" for g in groups)
    return "::" if set(groups) == {"0000"} else text


def read_listening(net_dir: Path | None = None) -> dict[int, Socket]:
    """Listening sockets by inode: ``ss -ltnx`` from /proc/net/{tcp,tcp6,unix}.

    Asks the kernel through sock_diag netlink, as ``ss`` does, when it can: listing
    /proc/net/tcp walks every bucket of the TCP hash table (~10 ms here, far more on a large
    server) however few sockets there are. ``net_dir``: parse saved /proc/net files instead.
    """
    if net_dir is None:
        found = _listening_netlink()
        if found is not None:
            return found
    base = net_dir or (PROC / "net")
    result: dict[int, Socket] = {}
    for kind, parse in (("tcp", _hex_addr_v4), ("tcp6", _hex_addr_v6)):
        text = _read(base / kind)
        for line in (text or "").splitlines()[1:]:
            cols = line.split()
            if len(cols) < 10 or cols[3] != "0A":  # 0A = TCP_LISTEN
                continue
            addr, _, port = cols[1].partition(":")
            try:  # a listener's rx_queue is its accept queue's length
                inode = int(cols[9])
                result[inode] = Socket(kind, parse(addr), int(port, 16), inode,
                                       int(cols[4].partition(":")[2] or "0", 16))
            except ValueError:
                continue
    text = _read(base / "unix")
    for line in (text or "").splitlines()[1:]:
        cols = line.split()
        # Flags 00010000 = __SO_ACCEPTCON: a listening unix socket.
        if len(cols) >= 7 and cols[3] == "00010000":
            path = cols[7] if len(cols) > 7 else ""
            try:
                result[int(cols[6])] = Socket("unix", path or "(unnamed)", None, int(cols[6]))
            except ValueError:
                continue
    return result


_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_NETLINK_SOCK_DIAG = 4
_TCP_LISTEN = 10
_UDIAG_SHOW_NAME = 1
_UDIAG_SHOW_RQLEN = 0x10
_UNIX_DIAG_RQLEN = 4


def _diag_dump(request: bytes, on_message: Callable[[bytes], None]) -> bool:
    """Send one sock_diag dump request; call ``on_message`` with each reply's payload.

    False when the kernel refuses or the reply cannot be read (the caller falls back)."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG)
    except (OSError, AttributeError):
        return False
    with sock:
        sock.settimeout(2.0)
        header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY,
                             _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
        try:
            sock.send(header + request)
            while True:
                data = sock.recv(1 << 16)
                if not data:
                    return False
                offset = 0
                while offset + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, offset)
                    if length < 16:
                        return False
                    if kind == _NLMSG_DONE:
                        return True
                    if kind == _NLMSG_ERROR:
                        return False
                    on_message(data[offset + 16:offset + length])
                    offset += (length + 3) & ~3
        except (OSError, struct.error):
            return False


def _addr_text(family: int, raw: bytes) -> str:
    """The address as the /proc/net/tcp{,6} parsers above write it."""
    if family == socket.AF_INET:
        return ".".join(str(b) for b in raw[:4])
    groups = [raw[i:i + 2].hex() for i in range(0, 16, 2)]
    text = ":".join(g.lstrip("0") or "0" for g in groups)
    return "::" if set(groups) == {"0000"} else text


def _listening_netlink() -> dict[int, Socket] | None:
    """Listening TCP (v4, v6) and unix sockets by inode through sock_diag; None: unavailable."""
    result: dict[int, Socket] = {}
    for family, kind in ((socket.AF_INET, "tcp"), (socket.AF_INET6, "tcp6")):
        def inet(payload: bytes, family: int = family, kind: str = kind) -> None:
            # inet_diag_msg: family, state, timer, retrans; sockid (sport, dport: big endian;
            # src, dst: 16 bytes each; if; cookie x2); expires, rqueue, wqueue, uid, inode.
            if len(payload) < 72 or payload[1] != _TCP_LISTEN:
                return
            port = struct.unpack_from("!H", payload, 4)[0]
            queued, inode = struct.unpack_from("=I", payload, 56)[0], struct.unpack_from(
                "=I", payload, 68)[0]  # a listener's rqueue: its accept queue's length
            result[inode] = Socket(kind, _addr_text(family, payload[8:24]), port, inode, queued)

        # inet_diag_req_v2: family, protocol, ext, pad, states; then a zeroed sockid.
        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
        if not _diag_dump(request + bytes(48), inet):
            return None

    def unix(payload: bytes) -> None:
        # unix_diag_msg: family, type, state, pad, inode, cookie x2; then attributes.
        if len(payload) < 16 or payload[2] != _TCP_LISTEN:
            return
        inode = struct.unpack_from("=I", payload, 4)[0]
        path, queued = "", 0
        offset = 16
        while offset + 4 <= len(payload):
            length, kind = struct.unpack_from("=HH", payload, offset)
            if length < 4:
                break
            if kind == 0:  # UNIX_DIAG_NAME, written as /proc/net/unix writes it: a path
                name = payload[offset + 4:offset + length]  # without its NUL, an abstract
                name = name[:-1] if name[:1] != b"\0" else name  # name with "@" for NULs
                path = name.replace(b"\0", b"@").decode(errors="replace")
            elif kind == _UNIX_DIAG_RQLEN and length >= 8:  # a listener's: its accept queue
                queued = struct.unpack_from("=I", payload, offset + 4)[0]
            offset += (length + 3) & ~3
        result[inode] = Socket("unix", path or "(unnamed)", None, inode, queued)

    # unix_diag_req: family, protocol, pad, states, inode, show, cookie x2.
    request = struct.pack("=BBHIII", socket.AF_UNIX, 0, 0, 1 << _TCP_LISTEN, 0,
                          _UDIAG_SHOW_NAME | _UDIAG_SHOW_RQLEN) + bytes(8)
    if not _diag_dump(request, unix):
        return None
    return result


def read_memory(pid: int, address: int, size: int) -> bytes | None:
    """``size`` bytes of process ``pid``'s memory at ``address`` (``/proc/PID/mem``: a read
    that does not stop the process); None when it cannot be read (gone, unmapped, no
    permission)."""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.pread(fd, size, address)
    except (OSError, OverflowError, ValueError):
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None


def read_children(pid: int) -> tuple[int, ...]:
    """``cat /proc/PID/task/*/children``."""
    kids: list[int] = []
    base = PROC / str(pid) / "task"
    try:
        tids = os.listdir(base)
    except OSError:
        return ()
    for tid in tids:
        text = _read(base / tid / "children")
        if text:
            kids.extend(int(c) for c in text.split() if c.isdigit())
    return tuple(sorted(set(kids)))


def meminfo() -> dict[str, int]:
    """``/proc/meminfo`` in bytes."""
    out = {}
    for line in (_read(PROC / "meminfo") or "").splitlines():
        key, _, value = line.partition(":")
        kb = _kb(value)
        if kb is not None:
            out[key] = kb
    return out


def cgroup_memory_limit() -> int | None:
    """The memory limit of this cgroup (v2 ``memory.max`` or v1 ``limit_in_bytes``)."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = _read(Path(path))
        if text and text.strip().isdigit():
            value = int(text.strip())
            if value < 1 << 60:
                return value
    return None


# --- reads other collectors need (the one home of /proc: nothing else opens it) -------------


def pids() -> list[int]:
    """``ls /proc``: every PID of this PID namespace (unordered)."""
    try:
        return [int(e) for e in os.listdir(PROC) if e.isdigit()]
    except OSError:
        return []


def exists(pid: int) -> bool:
    """``test -e /proc/PID``."""
    return (PROC / str(pid)).exists()


def read_exe(pid: int) -> str | None:
    """``readlink /proc/PID/exe`` (None: unreadable or gone)."""
    try:
        return os.readlink(PROC / str(pid) / "exe")
    except OSError:
        return None


def read_thread_switches(pid: int, tid: int) -> tuple[int | None, int | None]:
    """(voluntary, involuntary) context switches: ``grep ctxt_switches
    /proc/PID/task/TID/status``; (None, None) when unreadable."""
    text = _read(PROC / str(pid) / "task" / str(tid) / "status")
    if text is None:
        return None, None
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches") and (
                value.strip().isdigit()):
            found[key] = int(value)
    return found.get("voluntary_ctxt_switches"), found.get("nonvoluntary_ctxt_switches")


def read_io(pid: int, tid: int | None = None) -> dict[str, int] | None:
    """``cat /proc/PID/io`` (syscr, syscw, rchar, wchar, ...), or one thread's
    ``/proc/PID/task/TID/io``; None when unreadable."""
    text = _read(PROC / str(pid) / "io" if tid is None else
                 PROC / str(pid) / "task" / str(tid) / "io")
    if text is None:
        return None
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            values[key.strip()] = int(value)
    return values


def read_btime() -> float | None:
    """When this machine booted, seconds since the epoch (``btime`` of /proc/stat), read
    now (the kernel log's clock; :func:`boot_time` is psutil's, cached)."""
    try:
        for line in (_read(PROC / "stat") or "").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (ValueError, IndexError):
        return None
    return None


def read_fd_targets(pid: int) -> list[str]:
    """``readlink /proc/PID/fd/*``; whatever is readable (permission or a vanished PID: [])."""
    base = PROC / str(pid) / "fd"
    try:
        names = os.listdir(base)
    except OSError:
        return []
    targets: list[str] = []
    for name in names:
        try:
            targets.append(os.readlink(base / name))
        except OSError:
            continue
    return targets


def read_map_paths(pid: int, needle: str) -> set[str] | None:
    """The mapped file paths containing ``needle``: ``grep NEEDLE /proc/PID/maps`` (None:
    unreadable)."""
    try:
        with open(PROC / str(pid) / "maps", errors="replace") as fh:
            return {line.split(None, 5)[-1].strip() for line in fh if needle in line}
    except OSError:
        return None


def maps_libpython(pid: int) -> bool | None:
    """``grep -q libpython /proc/PID/maps``: an interpreter embedded in another program (its
    exe and command line do not say python) maps libpython. None: unreadable."""
    try:
        with open(PROC / str(pid) / "maps", errors="replace") as fh:
            return any("libpython" in line for line in fh)
    except OSError:
        return None


def list_in_root(pid: int, path: str) -> list[str]:
    """``ls /proc/PID/root/PATH``: a directory as the process sees it (its container's
    filesystem); [] when unreadable."""
    try:
        return [e.name for e in os.scandir(f"{PROC}/{pid}/root{path}")]
    except OSError:
        return []


def net_dir(pid: int) -> Path:
    """``/proc/PID/net``: the network tables of PID's namespace (for :func:`read_listening`)."""
    return PROC / str(pid) / "net"


def netns_inode(pid: int | str) -> int | None:
    """The inode of PID's network namespace (``stat -L /proc/PID/ns/net``); None: unreadable.
    ``pid`` may be ``"thread-self"``."""
    try:
        return os.stat(PROC / str(pid) / "ns" / "net").st_ino
    except OSError:
        return None


def open_netns(pid: int | str) -> int:
    """A descriptor of PID's network namespace for setns(2) (``"thread-self"``: the caller's).

    Raises:
        OSError: unreadable or gone.
    """
    return os.open(PROC / str(pid) / "ns" / "net", os.O_RDONLY)


def read_comm(pid: int) -> str | None:
    """``cat /proc/PID/comm``: the thread-group leader's name (also for a zombie)."""
    text = _cat(f"{PROC}/{pid}/comm")
    return text.strip() if text is not None else None


def open_paths(pid: int, suffix: str, limit: int = 4096) -> tuple[str, ...]:
    """``ls -l /proc/PID/fd``: the paths of the files the process holds open that end with
    ``suffix`` (a named FIFO shows its path; sockets and anonymous pipes never match)."""
    base = PROC / str(pid) / "fd"
    try:
        fds = os.listdir(base)[:limit]
    except OSError:
        return ()
    out = []
    for fd in fds:
        try:
            target = os.readlink(base / fd)
        except OSError:
            continue
        if target.endswith(suffix) and target.startswith("/"):
            out.append(target)
    return tuple(sorted(set(out)))


# -- who talks to whom: pipe and socket inodes -----------------------------------------------
#: fds read per process when looking for a job's pipe and socket peers (bounded: a server with
#: 10,000 connections costs no more than this).
PEER_FDS_PER_PROCESS = 256


def pipe_and_socket_inodes(pid: int, limit: int = PEER_FDS_PER_PROCESS) -> tuple[set[int],
                                                                               set[int]]:
    """``ls -l /proc/PID/fd``: the inodes of its pipes and of its sockets (first ``limit``)."""
    pipes: set[int] = set()
    sockets: set[int] = set()
    base = f"{PROC}/{pid}/fd"
    try:
        names = os.listdir(base)[:limit]
    except OSError:
        return pipes, sockets
    for name in names:
        try:
            target = os.readlink(f"{base}/{name}")
        except OSError:
            continue
        kind, _, rest = target.partition(":[")
        if rest.endswith("]") and rest[:-1].isdigit():
            if kind == "pipe":
                pipes.add(int(rest[:-1]))
            elif kind == "socket":
                sockets.add(int(rest[:-1]))
    return pipes, sockets


def pipe_ends(pid: int, inodes: Collection[int]) -> dict[int, str]:
    """Which end of each of these pipes ``pid`` holds: ``"r"``, ``"w"`` or ``"rw"`` (both
    ends, on several fds), from its fd links' mode bits (``ls -l /proc/PID/fd``)."""
    out: dict[int, str] = {}
    base = f"{PROC}/{pid}/fd"
    try:
        names = os.listdir(base)[:PEER_FDS_PER_PROCESS]
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink(f"{base}/{name}")
            inode = _inode_of(target) if target.startswith("pipe:") else None
            if inode is None or inode not in inodes:
                continue
            access = _link_access(os.lstat(f"{base}/{name}").st_mode)
        except OSError:
            continue
        if access:
            out[inode] = "".join(sorted(set(out.get(inode, "") + access)))
    return out


def stdio_pipes(pid: int) -> set[int]:
    """``ls -l /proc/PID/fd/{0,1,2}``: the inodes of the pipes on its stdin, stdout, stderr."""
    out: set[int] = set()
    for fd in (0, 1, 2):
        try:
            target = os.readlink(f"{PROC}/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:[") and target.endswith("]") and target[6:-1].isdigit():
            out.add(int(target[6:-1]))
    return out


def tcp_connections() -> dict[int, tuple[str, str]]:
    """``cat /proc/net/tcp /proc/net/tcp6``: socket inode -> (local, remote) address of every
    established connection of this network namespace (hex, as the kernel writes them)."""
    out: dict[int, tuple[str, str]] = {}
    for name in ("tcp", "tcp6"):
        text = _cat(f"{PROC}/net/{name}")
        for line in (text or "").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "01" and fields[9].isdigit():  # ESTABLISHED
                out[int(fields[9])] = (fields[1], fields[2])
    return out


def owner_uid(pid: int) -> int | None:
    """The owner of ``/proc/PID`` (its real user)."""
    try:
        return os.stat(f"{PROC}/{pid}").st_uid
    except OSError:
        return None


# -- the wait-for graph's raw facts: fds with their ends and locks, blocked syscalls, socket
#    peers (``ls -l /proc/PID/fd``, ``cat /proc/PID/fdinfo/N``, ``cat /proc/PID/task/TID/syscall``,
#    ``ss -xp``, ``ss -tp``). Read once per snapshot, for the job's processes only.

def _fdinfo_field(text: str, name: str) -> int | None:
    """An integer field of an fdinfo file (``tty-index:\t3``); None where it is absent."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def _fdinfo_locks(text: str) -> tuple[FileLockRecord, ...]:
    """The locks an open file holds: the ``lock:`` lines of ``/proc/PID/fdinfo/N``."""
    lines = [value.strip() for key, _, value in (line.partition(":") for line in
                                                 text.splitlines()) if key == "lock"]
    return parse_proc_locks("\n".join(lines)) if lines else ()


def _inode_of(target: str) -> int | None:
    """The inode in ``pipe:[123]`` / ``socket:[456]``."""
    if target.endswith("]") and "[" in target:
        with contextlib.suppress(ValueError):
            return int(target[target.index("[") + 1:-1])
    return None


def _link_access(mode: int) -> str | None:
    """The open mode of an fd from its /proc/PID/fd link's permission bits: the kernel sets
    owner read for FMODE_READ and owner write for FMODE_WRITE (one lstat; fdinfo's flags say
    the same at ~0.2 ms a file)."""
    read, write = bool(mode & stat_mod.S_IRUSR), bool(mode & stat_mod.S_IWUSR)
    return "rw" if read and write else "r" if read else "w" if write else None


def read_fd_records(pid: int, locked: Collection[tuple[int, int, int]] = ()
                    ) -> tuple[tuple[FdRecord, ...], str | None]:
    """Pipes, sockets, terminals and regular files open in ``pid``, with their access mode
    and, for a file among ``locked`` (the (major, minor, inode) keys /proc/locks lists), the
    locks it holds (fdinfo); (records, why none were read). GPU and anon-inode fds are
    skipped (nothing waits on the other end of them), but for inotify and fanotify (a read
    on one waits for the file system, a drop folder's service idles there) and eventfds (a
    zmq socket's mailbox: an event loop that receives from the socket watches it)."""
    base = f"{PROC}/{pid}"
    try:
        names = os.listdir(f"{base}/fd")
    except PermissionError:
        return (), "its fds are not ours to read"
    except OSError:
        return (), "gone"
    out = []
    for name in names:
        link = f"{base}/fd/{name}"
        try:
            target = os.readlink(link)
            access = _link_access(os.lstat(link).st_mode)
        except OSError:
            continue
        kind = _fd_kind(target)
        if kind not in ("pipe", "socket", "file", "eventfd") and not target.startswith((
                "/dev/pts/", "/dev/tty", "/dev/ptmx", *FILE_WATCHES)):
            continue
        if target == "/dev/ptmx":  # a pty's master: which /dev/pts/N it drives
            index = _fdinfo_field(_cat(f"{base}/fdinfo/{name}") or "", "tty-index")
            out.append(FdRecord(int(name), target, access, tty_index=index))
            continue
        if kind == "eventfd":  # its counter: signals not yet read (a zmq mailbox's command)
            text = _cat(f"{base}/fdinfo/{name}") or ""
            count = next((int(v.strip(), 16) for k, _, v in (
                line.partition(":") for line in text.splitlines())
                if k.strip() == "eventfd-count" and v.strip()), None)
            out.append(FdRecord(int(name), target, access, count=count))
            continue
        inode, device, locks = _inode_of(target), None, ()
        if kind == "file":
            try:
                st = os.stat(link)
            except OSError:
                continue
            inode, device = st.st_ino, (os.major(st.st_dev), os.minor(st.st_dev))
            if (*device, inode) in locked and (info := _cat(f"{base}/fdinfo/{name}")):
                locks = _fdinfo_locks(info)
        out.append(FdRecord(int(name), target, access, inode, device, locks))
    out.sort(key=lambda r: r.fd)
    return tuple(out), None


def read_syscalls(pid: int, tids: Iterable[int] | None = None) -> tuple[TaskSyscall, ...]:
    """The syscall each blocked thread of ``pid`` (or of ``tids``) is in:
    ``/proc/PID/task/TID/syscall`` ("running" and "-1 ..." (in user space) are skipped)."""
    base = f"{PROC}/{pid}/task"
    if tids is None:
        try:
            tids = [int(t) for t in os.listdir(base) if t.isdigit()]
        except OSError:
            return ()
    out = []
    for tid in tids:
        text = _cat(f"{base}/{tid}/syscall")
        parts = (text or "").split()
        if len(parts) < 7 or not parts[0].isdigit():
            continue
        with contextlib.suppress(ValueError):
            nr, args = int(parts[0]), tuple(int(a, 16) for a in parts[1:7])
            polled = _pollfds(pid, args) if nr in _POLL.get(_ARCH, ()) or (
                nr in _RESTART and _in_poll(f"{base}/{tid}")) else \
                _selectfds(pid, args) if nr in _SELECT.get(_ARCH, ()) else ()
            path = _fifo_path(pid, nr, args) if nr in _OPEN.get(_ARCH, {}) and (
                _cat(f"{base}/{tid}/wchan") or "") in _FIFO_OPEN else None
            watched = _epollfds(pid, args[0]) if nr in _EPOLL.get(_ARCH, ()) else ()
            out.append(TaskSyscall(int(tid), nr, args, polled, path, watched))
    out.sort(key=lambda t: t.tid)
    return tuple(out)


_ARCH = platform.machine()
_POLL = {"x86_64": (7, 271), "aarch64": (73,)}  # poll, ppoll
_SELECT = {"x86_64": (23, 270), "aarch64": (72,)}  # select, pselect6
_EPOLL = {"x86_64": (232, 281, 441), "aarch64": (22, 441)}  # epoll_wait, epoll_pwait(2)
_POLLIN, _POLLOUT = 0x001, 0x004
_MAX_POLLED = 64
# A poll with a timeout that a ptrace stop (py-spy's) interrupted goes on as restart_syscall,
# its registers still holding poll's arguments; the wait channel says it is a poll.
_RESTART = SYSCALLS.get(_ARCH, {}).get("restart", set())


#: open, openat (x86_64); openat (aarch64): which argument holds the path, after a dirfd or not.
_OPEN = {"x86_64": {2: 0, 257: 1}, "aarch64": {56: 1}}
_FIFO_OPEN = ("wait_for_partner", "fifo_open")
_AT_FDCWD = -100
_MAX_PATH = 4096


def _fifo_path(pid: int, nr: int, args: tuple[int, ...]) -> str | None:
    """The path a thread blocked opening a FIFO opens: the string at its path argument, read
    from /proc/PID/mem (the access py-spy has), made absolute from its cwd or dirfd. The
    kernel keeps no name for an open still waiting for its partner: no fd exists yet."""
    at = _OPEN[_ARCH][nr]
    if len(args) <= at or not args[at]:
        return None
    try:
        with open(f"{PROC}/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(args[at])
            raw = mem.read(_MAX_PATH)
    except (OSError, ValueError, OverflowError):
        return None
    name = raw.split(b"\0", 1)[0].decode(errors="replace")
    if not name or name.startswith("/"):
        return name or None
    dirfd = args[0] - (1 << 64) if at == 1 and args[0] >= 1 << 63 else args[0]
    if at == 1 and dirfd & 0xFFFFFFFF == _AT_FDCWD & 0xFFFFFFFF:
        dirfd = _AT_FDCWD
    where = f"{PROC}/{pid}/cwd" if at == 0 or dirfd == _AT_FDCWD else f"{PROC}/{pid}/fd/{dirfd}"
    try:
        return os.path.normpath(os.path.join(os.readlink(where), name))
    except OSError:
        return name


def read_wchan(pid: int, tid: int) -> str | None:
    """``cat /proc/PID/task/TID/wchan``: the kernel function a blocked thread sleeps in."""
    text = (_cat(f"{PROC}/{pid}/task/{tid}/wchan") or "").strip()
    return text if text and text != "0" else None


def _in_poll(task: str) -> bool:
    return (_cat(f"{task}/wchan") or "").startswith(("poll_schedule_timeout", "do_sys_poll"))


def _epollfds(pid: int, epfd: int) -> tuple[tuple[int, int], ...]:
    """The (fd, events) an epoll instance watches: the ``tfd: N events: HEX`` lines of its
    fd's fdinfo (an asyncio loop in ``epoll_wait``: its self-pipe and its sockets)."""
    text = _cat(f"{PROC}/{pid}/fdinfo/{epfd}") if 0 <= epfd < 1 << 31 else None
    out = []
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "tfd:" and parts[2] == "events:":
            with contextlib.suppress(ValueError):
                out.append((int(parts[1]), int(parts[3], 16)))
    return tuple(sorted(out))[:_MAX_POLLED]


def _selectfds(pid: int, args: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The (fd, poll events) of a thread blocked in select/pselect6: the bits of its read and
    write ``fd_set`` s (``nfds`` of them, at its second and third arguments), read from
    /proc/PID/mem (the access py-spy has). ``select.select([stdout_of_child], ...)``."""
    nfds = args[0]
    if not 0 < nfds <= 1024:
        return ()
    size = (nfds + 7) // 8
    out: dict[int, int] = {}
    try:
        with open(f"{PROC}/{pid}/mem", "rb", buffering=0) as mem:
            for address, event in ((args[1], _POLLIN), (args[2], _POLLOUT)):
                if not address:
                    continue
                mem.seek(address)
                bits = int.from_bytes(mem.read(size), "little")
                for fd in range(nfds):
                    if bits >> fd & 1:
                        out[fd] = out.get(fd, 0) | event
    except (OSError, ValueError, OverflowError):
        return ()
    return tuple(sorted(out.items()))[:_MAX_POLLED]


def _pollfds(pid: int, args: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The (fd, events) of a thread blocked in poll/ppoll: its ``struct pollfd`` array
    (int fd; short events; short revents), read from /proc/PID/mem (the access py-spy has)."""
    address, count = args[0], args[1]
    if not address or not 0 < count <= _MAX_POLLED:
        return ()
    try:
        with open(f"{PROC}/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            raw = mem.read(8 * count)
    except (OSError, ValueError, OverflowError):
        return ()
    return tuple((fd, events) for fd, events, _ in struct.iter_unpack("=ihh", raw[:8 * count])
                 if fd >= 0)


_UDIAG_SHOW_PEER = 4
_UDIAG_SHOW_ICONS = 8
_UNIX_DIAG_NAME = 0
_UNIX_DIAG_PEER = 2
_UNIX_DIAG_ICONS = 3


def read_unix_peers(inodes: frozenset[int]) -> tuple[UnixPeer, ...]:
    """The peer inode of each connected Unix socket among ``inodes`` (sock_diag, as
    ``ss -xp`` reads it) and the bytes it sent that its peer has not read, and each of them a
    listener has not accepted yet (its pending connections, UNIX_DIAG_ICONS); () where the
    kernel refuses."""
    found: list[UnixPeer] = []

    def unix(payload: bytes) -> None:
        if len(payload) < 16:
            return
        inode = struct.unpack_from("=I", payload, 4)[0]
        listening = payload[2] == _TCP_LISTEN
        if inode not in inodes and not listening:
            return
        offset = 16
        peer, name, pending, unsent = 0, None, (), None
        while offset + 4 <= len(payload):
            length, kind = struct.unpack_from("=HH", payload, offset)
            if length < 4:
                break
            if kind == _UNIX_DIAG_PEER and length >= 8:
                peer = struct.unpack_from("=I", payload, offset + 4)[0]
            elif kind == _UNIX_DIAG_NAME and length > 4:
                raw = payload[offset + 4:offset + length]
                # an abstract name starts with NUL; ss shows it with "@"
                name = ("@" + raw[1:].decode(errors="replace") if raw[:1] == b"\0"
                        else raw.split(b"\0", 1)[0].decode(errors="replace"))
            elif kind == _UNIX_DIAG_ICONS:  # the client inodes in the accept queue
                count = (length - 4) // 4
                pending = struct.unpack_from(f"={count}I", payload, offset + 4)
            elif kind == _UNIX_DIAG_RQLEN and length >= 12 and not listening:
                # (rqueue, wqueue); a connected end's wqueue: what it sent, unread by its peer
                unsent = struct.unpack_from("=I", payload, offset + 8)[0]
            offset += (length + 3) & ~3
        if peer and inode in inodes:
            found.append(UnixPeer(inode, peer, name or None, unsent=unsent))
        found.extend(UnixPeer(client, 0, name or None, listener=inode)
                     for client in pending if client in inodes)

    request = struct.pack("=BBHIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0,
                          _UDIAG_SHOW_PEER | _UDIAG_SHOW_NAME | _UDIAG_SHOW_ICONS
                          | _UDIAG_SHOW_RQLEN) + bytes(8)
    return tuple(found) if inodes and _diag_dump(request, unix) else ()


#: sock_diag's INET_DIAG_INFO attribute (its request bit is 1 << (2 - 1)): struct tcp_info,
#: whose ``tcpi_last_data_sent`` and ``tcpi_last_data_recv`` (ms since data last left or came)
#: lie at these offsets (linux/tcp.h, unchanged since 2.6).
_INET_DIAG_INFO = 2
_LAST_DATA_SENT, _LAST_DATA_RECV = 44, 52


def _tcp_info(payload: bytes) -> tuple[int | None, int | None]:
    """(ms since data was last sent, since it last came) from an inet_diag_msg's attributes."""
    offset = 72
    while offset + 4 <= len(payload):
        length, kind = struct.unpack_from("=HH", payload, offset)
        if length < 4:
            break
        if kind == _INET_DIAG_INFO and length >= 4 + _LAST_DATA_RECV + 4:
            return (struct.unpack_from("=I", payload, offset + 4 + _LAST_DATA_SENT)[0],
                    struct.unpack_from("=I", payload, offset + 4 + _LAST_DATA_RECV)[0])
        offset += (length + 3) & ~3
    return None, None


def read_tcp_connections(inodes: frozenset[int]) -> tuple[TcpConnection, ...]:
    """The TCP sockets among ``inodes`` that are not listening, with both ends (sock_diag,
    as ``ss -tni`` reads it): the bytes unread in each's receive queue and how long ago data
    last left and came (tcp_info)."""
    found: list[TcpConnection] = []
    for family in (socket.AF_INET, socket.AF_INET6):
        def inet(payload: bytes, family: int = family) -> None:
            if len(payload) < 72:
                return
            inode = struct.unpack_from("=I", payload, 68)[0]
            if inode not in inodes:
                return
            sport, dport = struct.unpack_from("!HH", payload, 4)
            sent, came = _tcp_info(payload)
            found.append(TcpConnection(
                inode, f"{_addr_text(family, payload[8:24])}:{sport}",
                f"{_addr_text(family, payload[24:40])}:{dport}", payload[1],
                struct.unpack_from("=I", payload, 56)[0], sent, came,
                struct.unpack_from("=I", payload, 60)[0]))

        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 1 << (_INET_DIAG_INFO - 1),
                              0, 0xFFF & ~(1 << _TCP_LISTEN))
        if not inodes or not _diag_dump(request + bytes(48), inet):
            break
    return tuple(found)


def read_kernel_waits(pids: Iterable[int],
                      tids: dict[int, Iterable[int]] | None = None) -> KernelWaits:
    """Fds, blocked syscalls and socket peers of the job's processes, in one pass.

    ``tids``: PID -> the threads whose syscall to read (default: all of them)."""
    started = time.monotonic()
    procs = []
    inodes: set[int] = set()
    locked = {r.file_key for r in parse_proc_locks(_cat(f"{PROC}/locks") or "")}
    for pid in pids:
        # The syscalls first: a thread blocked in one keeps the fds it waits on open while
        # the fds are read; read after them, it may wait on one opened in between.
        calls = read_syscalls(pid, (tids or {}).get(pid))
        fds, error = read_fd_records(pid, locked)
        procs.append(ProcessFds(pid, fds, calls if error is None else (), error))
        inodes.update(r.inode for r in fds
                      if r.inode is not None and r.target.startswith("socket:"))
    frozen = frozenset(inodes)
    return KernelWaits(platform.machine(), tuple(procs), read_unix_peers(frozen),
                       read_tcp_connections(frozen), round(time.monotonic() - started, 4))


def ancestors(pid: int) -> tuple[int, ...]:
    """``ps -o ppid`` climbed to init: the parents of ``pid``, nearest first."""
    out: list[int] = []
    current = pid
    while len(out) < 4096:
        stat = read_stat(current)
        if stat is None or stat.ppid <= 0 or stat.ppid in out:
            break
        out.append(stat.ppid)
        current = stat.ppid
    return tuple(out)


def read_local_addresses() -> frozenset[str]:
    """This machine's own IP addresses: the IPv4 ``host LOCAL`` entries of
    /proc/net/fib_trie and the IPv6 ones of /proc/net/if_inet6 (as ``ip addr`` lists them),
    so that a node named by address is known as this node without asking DNS."""
    found: set[str] = set()
    lines = (_cat(f"{PROC}/net/fib_trie") or "").splitlines()
    for line, following in itertools.pairwise(lines):
        if line.strip().startswith("|--") and following.strip() == "/32 host LOCAL":
            found.add(line.strip()[3:].strip())
    for row in (_cat(f"{PROC}/net/if_inet6") or "").splitlines():
        hexed = row.split()[0] if row.split() else ""
        if len(hexed) == 32:
            with contextlib.suppress(ValueError):
                found.add(socket.inet_ntop(socket.AF_INET6, bytes.fromhex(hexed)))
    return frozenset(found)
