"""When the window may end early: the job's silence before the dump already covers it.

The window tells stuck from slow by watching the job for as long as it is asked (2 s by
default). A job whose every Python thread had been off CPU for longer than that before the
dump touched it, each blocked in a wait that has no timeout, can only be woken by someone
else: another process of the job that moves, which the window's counters see at once, or the
world outside (a client, another node), whose next message is no likelier in the rest of the
window than a second after it. So once the window has seen nothing of the job move (no I/O,
its helpers' CPU only) for :data:`SETTLE_MIN_S`, watching on would show nothing that the
silence before it did not: the window ends there. Each Python thread has then been silent
for the whole window asked for and more before the verdict says stuck, never less.

What keeps the whole window: a timed wait (a poll loop, a sleep, ``Queue.get(timeout=)``:
its wake-up may come inside the window), a thread that ran within the window's length before
the dump, a process that read, wrote or computed since the window began, a job on a GPU host
(GPM watches kernels no host counter shows), a window given with ``--window``.

"A wait with no timeout" is read from ``/proc/PID/task/TID/syscall`` (the number and six
arguments of the syscall a blocked thread is in), right before py-spy pauses the process: a
futex whose deadline pointer is NULL, a blocking read or write, poll/epoll with a timeout of
-1, select/ppoll without a timeout, a wait for a child, a file lock, an accept. A wait whose
deadline lies beyond the window counts the same (it cannot end by itself inside it): gloo's
send and recv, a TCPStore get and Python's ``Event.wait(600)`` wait on a futex with an absolute
deadline (glibc's timed waits: FUTEX_WAIT_BITSET), read from the thread's memory
(``/proc/PID/mem``, the access py-spy has); a sleep to an absolute time (``clock_nanosleep``
with TIMER_ABSTIME: Python's ``time.sleep``) likewise; a poll's timeout counts from when the
thread last ran. A deadline that cannot be read (a relative futex timeout, a wait a ptrace stop
interrupted that resumed as ``restart_syscall`` with no absolute time to read) is taken as due.
"""

from __future__ import annotations

import math
import os
import platform
import struct
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from hangscope.collect import procfs, pyspy
from hangscope.model.waits import SYSCALLS, TaskSyscall

#: The least of the window watched, however long the job was silent before it.
SETTLE_MIN_S = 1.0
#: CPU a process's own helpers use while it waits (a gloo rank: ~2 ms a second, its loop
#: thread waking every 10 ms), as a share of one core: more says something runs.
HELPERS_CPU_SHARE = 0.02

_ARCH = platform.machine()

# Syscalls that wait with no timeout whatever their arguments: blocking reads and writes
# (recvfrom/recvmsg among them; Python's socket timeouts wait in poll), waits for a child,
# flock, and accept/accept4 and pause, which the table does not name.
_ACCEPT_PAUSE = {"x86_64": {43, 288, 34}, "aarch64": {202, 242}}
_ALWAYS = {arch: table["read"] | table["write"] | table["wait"] | table["flock"]
           | _ACCEPT_PAUSE[arch] for arch, table in SYSCALLS.items()}
# Syscalls whose timeout is one argument: (index, how to read it). "ptr": a pointer to the
# timeout, NULL for none (futex, ppoll, select, pselect6, epoll_pwait2, rt_sigtimedwait);
# "ms": an int of milliseconds, negative for none (poll, epoll_wait, epoll_pwait). Read before
# the table above: recvmmsg is a read with a timeout.
_TIMEOUT_ARG = {
    "x86_64": {299: (4, "ptr"), 202: (3, "ptr"), 271: (2, "ptr"), 23: (4, "ptr"), 270: (4, "ptr"),
               441: (3, "ptr"), 128: (2, "ptr"), 7: (2, "ms"), 232: (3, "ms"),
               281: (3, "ms")},
    "aarch64": {243: (4, "ptr"), 98: (3, "ptr"), 73: (2, "ptr"), 72: (4, "ptr"), 441: (3, "ptr"),
                137: (2, "ptr"), 22: (3, "ms")},
}
_FCNTL_SETLKW = (7, 38)  # F_SETLKW, F_OFD_SETLKW: a lock taken by waiting for it


def untimed(call: TaskSyscall, arch: str = _ARCH) -> bool:
    """Whether ``call`` waits with no timeout: only another party can end it."""
    where = _TIMEOUT_ARG.get(arch, {}).get(call.nr)
    if where is not None:
        if len(call.args) <= where[0]:
            return False
        value = call.args[where[0]]
        return value == 0 if where[1] == "ptr" else bool(value & 0x80000000)  # int32 < 0
    if call.nr in SYSCALLS.get(arch, {}).get("fcntl", ()):
        return len(call.args) > 1 and call.args[1] in _FCNTL_SETLKW
    # restart_syscall (a timed wait resumed), a sleep, anything unknown: not known untimed
    return call.nr in _ALWAYS.get(arch, ())


# FUTEX_LOCK_PI, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2: an absolute deadline
# (LOCK_PI's on CLOCK_REALTIME, the others' on it where FUTEX_CLOCK_REALTIME is set).
_FUTEX_ABSOLUTE = {6, 9, 11, 13}
_FUTEX_CMD = 0x7F  # the op without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME
_FUTEX_CLOCK_REALTIME = 256
_TIMER_ABSTIME = 1

#: (pid, address, size) -> those bytes of the process's memory, or None.
ReadMemory = Callable[[int, int, int], "bytes | None"]


def waits_on(pid: int, call: TaskSyscall, off_cpu: float, *, wchan: str | None = None,
             read: ReadMemory = procfs.read_memory, arch: str = _ARCH) -> float:
    """Seconds ``call`` goes on waiting from now unless another party ends it: infinite for a
    wait with no timeout, the time left to its deadline where one can be read, 0 where not.
    ``off_cpu``: how long the thread has been off CPU (in its wait since it last ran);
    ``wchan``: what a ``restart_syscall`` sleeps in (read here where not given)."""
    table = SYSCALLS.get(arch)
    if table is None:
        return 0.0
    if untimed(call, arch):
        return math.inf
    args, futex = call.args, call.nr in table["futex"]
    if call.nr in table["restart"]:
        if call.polled:
            # a poll a ptrace stop interrupted (procfs read its fds from its registers, which
            # still hold its arguments): -1 ms resumes with no timeout (zmq's blocking recv)
            return math.inf if len(args) > 2 and args[2] & 0x80000000 else 0.0
        # a futex's registers, or not one
        futex = (wchan if wchan is not None else procfs.read_wchan(pid, call.tid) or ""
                 ).startswith("futex")
    if futex and len(args) > 3 and args[3]:
        cmd = args[1] & _FUTEX_CMD
        if cmd not in _FUTEX_ABSOLUTE:
            return 0.0  # a relative timeout: when it started is not known
        realtime = cmd == 6 or bool(args[1] & _FUTEX_CLOCK_REALTIME)
        return _left(pid, args[3], time.CLOCK_REALTIME if realtime else time.CLOCK_MONOTONIC,
                     read)
    if call.nr in table["clock_nanosleep"] and len(args) > 2 and args[1] & _TIMER_ABSTIME:
        return _left(pid, args[2], args[0], read)
    where = _TIMEOUT_ARG.get(arch, {}).get(call.nr)
    if where is not None and where[1] == "ms":  # (a poll not resumed: its timeout whole)
        return (args[where[0]] & 0xFFFFFFFF) / 1000 - off_cpu
    return 0.0


def _left(pid: int, address: int, clock: int, read: ReadMemory) -> float:
    """The time left to the absolute ``struct timespec`` at ``address`` on ``clock``."""
    raw = read(pid, address, 16) if address else None
    if raw is None:
        return 0.0
    seconds, nanoseconds = struct.unpack("=qq", raw)
    try:
        now = time.clock_gettime(clock)
    except OSError:
        return 0.0
    return seconds + nanoseconds / 1e9 - now


def wait_ends(pid: int, calls: Sequence[TaskSyscall], off_cpu: Mapping[int, float], *,
              read: ReadMemory = procfs.read_memory) -> dict[int, float]:
    """When each thread's wait ends unless another party ends it (``time.monotonic``
    seconds; infinite for one with no timeout), its deadline read now, with its syscall: once
    a timed wait ends, a thread that waits again (``Event.wait`` in a loop) writes its new
    deadline where the old one was, so a read later says the new one."""
    now = time.monotonic()
    return {c.tid: now + waits_on(pid, c, off_cpu.get(c.tid, 0.0), read=read) for c in calls}


def silent_before(pid: int, dump: pyspy.DumpResult | None, off_cpu: Mapping[int, float],
                  ends: Mapping[int, float], window: float, *, now: float | None = None) -> bool:
    """Every Python thread of ``dump`` had been off CPU for ``window`` or longer, in a wait
    that nothing ends within ``window`` from ``now`` (``ends``: :func:`wait_ends`), when
    process ``pid`` was read (before py-spy paused it)."""
    if dump is None or not dump.ok or not dump.threads:
        return False
    now = time.monotonic() if now is None else now
    return all(off_cpu.get(t.tid, 0.0) >= window and ends.get(t.tid, -math.inf) - now > window
               for t in dump.threads)


def on_gpu_host(gpus: int, fd_targets: Collection[str]) -> bool:
    """The host has GPUs (NVML) or a process of the job holds a GPU device open."""
    return gpus > 0 or any(t.startswith(_GPU_DEVICES) for t in fd_targets)


_GPU_DEVICES = "/dev/nvidia"


def gpu_devices(dev: str = "/dev") -> bool:
    """``ls /dev/nvidia*``: GPU device files here (a container given GPUs has them), known
    before NVML answers, so a GPU host reads no syscalls for a window it keeps whole."""
    try:
        return any(name.startswith("nvidia") for name in os.listdir(dev))
    except OSError:
        return False
