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
-1, select/ppoll without a timeout, a wait for a child, a file lock, an accept. A timed wait
that a ptrace stop interrupted goes on as ``restart_syscall``: timed.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Collection, Mapping, Sequence

from hangscope.collect import pyspy
from hangscope.model.waits import SYSCALLS, TaskSyscall

#: The least of the window watched, however long the job was silent before it.
SETTLE_MIN_S = 1.0
#: CPU a process's own helpers use while it waits (a gloo rank: ~2 ms a second, its loop
#: thread waking every 10 ms), as a share of one core: more says something runs.
HELPERS_CPU_SHARE = 0.02

_ARCH = platform.machine()

# Syscalls that wait with no timeout whatever their arguments: blocking reads and writes
# (recvfrom/recvmsg among them; Python's socket timeouts wait in poll), waits for a child,
# flock, accept/accept4, pause.
_ALWAYS = {
    "x86_64": (SYSCALLS["x86_64"]["read"] | SYSCALLS["x86_64"]["write"]
               | SYSCALLS["x86_64"]["wait"] | SYSCALLS["x86_64"]["flock"] | {43, 288, 34}),
    "aarch64": (SYSCALLS["aarch64"]["read"] | SYSCALLS["aarch64"]["write"]
                | SYSCALLS["aarch64"]["wait"] | SYSCALLS["aarch64"]["flock"] | {202, 242}),
}
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


def silent_before(dump: pyspy.DumpResult | None, off_cpu: Mapping[int, float],
                  calls: Sequence[TaskSyscall], window: float) -> bool:
    """Every Python thread of ``dump`` had been off CPU for ``window`` or longer, blocked in a
    wait with no timeout, when its process was read (before py-spy paused it)."""
    if dump is None or not dump.ok or not dump.threads:
        return False
    blocked = {c.tid: c for c in calls}
    return all(off_cpu.get(t.tid, 0.0) >= window and (c := blocked.get(t.tid)) is not None
               and untimed(c) for t in dump.threads)


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
