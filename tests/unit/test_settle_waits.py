"""Which waits have no timeout, and which jobs were silent long enough (live/settle.py).

GIVEN the syscalls real blocked threads were in (``/proc/PID/task/TID/syscall`` of a torchrun
job hung over gloo, read on x86_64: a rank's main thread in an untimed futex, gloo's loop in
``epoll_wait(..., 10)``, the TCPStore's in ``epoll_pwait(..., -1)``, the agent in
``clock_nanosleep``) WHEN asked whether each waits with no timeout THEN only the ones only
another party can end say so.
"""

from __future__ import annotations

import math
import struct
import time
from pathlib import Path

from hangscope.collect.pyspy import DumpResult, PyThread
from hangscope.live.settle import (
    gpu_devices,
    on_gpu_host,
    silent_before,
    untimed,
    wait_ends,
    waits_on,
)
from hangscope.model.waits import TaskSyscall

X86, ARM = "x86_64", "aarch64"


def call(nr: int, *args: int, tid: int = 1) -> TaskSyscall:
    return TaskSyscall(tid, nr, tuple(args) + (0,) * (6 - len(args)))


def test_waits_with_no_timeout_on_x86_64() -> None:
    # a gloo rank's main thread: futex(uaddr, FUTEX_WAIT_BITSET|PRIVATE, val, NULL)
    assert untimed(call(202, 0x5621253083B0, 0x189, 0, 0), X86)
    assert untimed(call(281, 3, 0x7F28AE010B10, 0x400, 0xFFFFFFFF), X86)  # epoll_pwait, -1
    assert untimed(call(0, 5, 0x7F00, 1), X86)  # read
    assert untimed(call(7, 0x7F00, 2, 0xFFFFFFFF), X86)  # poll, -1
    assert untimed(call(23, 4, 0x7F00, 0, 0, 0), X86)  # select, NULL timeout
    assert untimed(call(61, 0xFFFFFFFF, 0x7F00, 0), X86)  # wait4
    assert untimed(call(72, 3, 7, 0x7F00), X86)  # fcntl(F_SETLKW)
    assert untimed(call(43, 3), X86)  # accept


def test_waits_that_end_by_themselves_on_x86_64() -> None:
    assert not untimed(call(202, 0x7F27C40091D8, 0x189, 0, 0x7F27D2812240), X86)  # deadline
    assert not untimed(call(232, 6, 0x7F27D3013B80, 0x40, 0xA), X86)  # epoll_wait, 10 ms
    assert not untimed(call(230, 1, 1, 0x7FFC1A37B610), X86)  # clock_nanosleep
    assert not untimed(call(219), X86)  # restart_syscall: a timed wait a stop interrupted
    assert not untimed(call(7, 0x7F00, 2, 100), X86)  # poll, 100 ms
    assert not untimed(call(271, 0x7F00, 2, 0x7FFC0000), X86)  # ppoll with a timespec
    assert not untimed(call(299, 3, 0x7F00, 8, 0, 0x7FFC0000), X86)  # recvmmsg, timeout
    assert not untimed(call(72, 3, 6, 0x7F00), X86)  # fcntl(F_SETLK): does not wait


def test_aarch64_numbers() -> None:
    assert untimed(call(98, 0xAAAA0000, 0x80, 0, 0), ARM)  # futex, NULL
    assert not untimed(call(98, 0xAAAA0000, 0x80, 0, 0xFFFF0000), ARM)
    assert untimed(call(22, 3, 0xFFFF0000, 8, 0xFFFFFFFF), ARM)  # epoll_pwait, -1
    assert untimed(call(63, 3, 0xFFFF0000, 1), ARM)  # read
    assert not untimed(call(101, 0xFFFF0000, 0), ARM)  # nanosleep
    assert not untimed(call(202, 3), "riscv64")  # a machine whose numbers are not known


def _dump(*tids: int) -> DumpResult:
    return DumpResult(7, tuple(PyThread(t, None, False, False, ()) for t in tids))


def _memory(*at: tuple[int, float]) -> object:
    """A process's memory holding a ``struct timespec`` of each (address, seconds)."""
    held = {address: struct.pack("=qq", int(t), int((t % 1) * 1e9)) for address, t in at}
    return lambda pid, address, size: held.get(address)


def test_how_long_a_timed_wait_goes_on_is_read_from_its_deadline() -> None:
    real, mono = time.clock_gettime(time.CLOCK_REALTIME), time.clock_gettime(time.CLOCK_MONOTONIC)
    read = _memory((0x100, real + 1800), (0x200, mono + 600), (0x300, mono + 0.5))
    # gloo's recv: FUTEX_WAIT_BITSET | PRIVATE | CLOCK_REALTIME to an absolute time
    assert 1790 < waits_on(7, call(202, 0xA, 0x189, 0, 0x100), 5.0, read=read, arch=X86) < 1801
    # Python's Event.wait(600): sem_clockwait, the same on CLOCK_MONOTONIC
    assert 590 < waits_on(7, call(202, 0xA, 0x89, 0, 0x200), 5.0, read=read, arch=X86) < 601
    assert waits_on(7, call(202, 0xA, 0x89, 0, 0x300), 5.0, read=read, arch=X86) < 1
    # a relative FUTEX_WAIT timeout, a deadline that cannot be read: due now
    assert waits_on(7, call(202, 0xA, 0x80, 0, 0x100), 5.0, read=read, arch=X86) == 0
    assert waits_on(7, call(202, 0xA, 0x189, 0, 0x999), 5.0, read=read, arch=X86) == 0
    # resumed after a ptrace stop: a futex's registers where its wchan says futex
    assert waits_on(7, call(219, 0xA, 0x189, 0, 0x100), 5.0, wchan="futex_do_wait",
                    read=read, arch=X86) > 1790
    assert waits_on(7, call(219, 0xA, 0x189, 0, 0x100), 5.0, wchan="do_sys_poll",
                    read=read, arch=X86) == 0
    # a poll a ptrace stop interrupted: zmq's blocking recv, poll(fds, 1, -1), resumes untimed
    polled = TaskSyscall(8, 219, (0x7FFEC33F4648, 1, 0xFFFFFFFF, 0, 0, 0), polled=((9, 1),))
    assert waits_on(7, polled, 5.0, read=read, arch=X86) == math.inf
    timed = TaskSyscall(8, 219, (0x7FFEC33F4648, 1, 100, 0, 0, 0), polled=((9, 1),))
    assert waits_on(7, timed, 5.0, read=read, arch=X86) == 0
    # time.sleep: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline)
    assert 590 < waits_on(7, call(230, 1, 1, 0x200), 5.0, read=read, arch=X86) < 601
    assert waits_on(7, call(230, 1, 0, 0x200), 5.0, read=read, arch=X86) == 0  # relative
    # a poll's timeout counts from when the thread last ran
    assert waits_on(7, call(7, 0x7F00, 2, 5000), 1.5, read=read, arch=X86) == 3.5
    assert waits_on(7, call(232, 6, 0x7F00, 64, 0xFFFFFFFF), 1.5, arch=X86) == math.inf


def test_silent_before_needs_every_python_thread_long_off_cpu_in_a_wait_beyond_it() -> None:
    mono = time.clock_gettime(time.CLOCK_MONOTONIC)
    read = _memory((0x7F00, mono + 600), (0x7E00, mono + 1.0))
    calls = (call(202, 1, 0x80, 0, 0, tid=7), call(0, 5, 1, 1, tid=8),
             call(202, 1, 0x89, 0, 0x7E00, tid=9), call(202, 1, 0x89, 0, 0x7F00, tid=12))
    off = {7: 30.0, 8: 2.5, 9: 60.0, 10: 0.01, 12: 3.0}  # 10: a native thread: not asked
    ends = wait_ends(7, calls, off, read=read)
    assert silent_before(7, _dump(7, 8), off, ends, 2.0)
    assert silent_before(7, _dump(7, 12), off, ends, 2.0)  # 600 s away
    assert not silent_before(7, _dump(7, 8), off, ends, 3.0)  # 8 ran 2.5 s ago
    assert not silent_before(7, _dump(7, 9), off, ends, 2.0)  # 9's is 1 s away
    assert not silent_before(7, _dump(7, 11), off, ends, 2.0)  # 11: not blocked
    assert not silent_before(7, _dump(), off, ends, 2.0)  # no Python thread read
    assert not silent_before(7, DumpResult(7, error="gone"), off, ends, 2.0)
    assert not silent_before(7, None, off, ends, 2.0)


def test_a_deadline_is_read_with_its_syscall_not_when_the_window_is_judged() -> None:
    # Event.wait(3) in a loop, read 2.9 s into a wait (0.1 s left); by the time the window
    # is judged it woke and waits again, its new deadline (3 s away) where the old one was
    # (CI: the window ended after 1.0 s on such a job).
    mono = time.clock_gettime(time.CLOCK_MONOTONIC)
    memory = {0x7E00: mono + 0.1}
    def read(pid: int, address: int, size: int) -> bytes | None:
        when = memory.get(address)
        return None if when is None else struct.pack("=qq", int(when), int(when % 1 * 1e9))
    calls = (call(202, 1, 0x89, 0, 0x7E00, tid=9),)
    ends = wait_ends(7, calls, {9: 2.9}, read=read)
    memory[0x7E00] = mono + 3.1  # the next wait's deadline, written over the old one
    assert not silent_before(7, _dump(7, 9), {9: 2.9}, ends, 2.0, now=time.monotonic() + 1.0)


def test_a_gpu_host_keeps_the_window() -> None:
    assert on_gpu_host(8, ())
    assert on_gpu_host(0, ("/dev/nvidia0", "socket:[1]"))
    assert not on_gpu_host(0, ("/dev/null", "pipe:[3]"))


def test_gpu_device_files_say_a_gpu_host_before_nvml_answers(tmp_path: Path) -> None:
    assert not gpu_devices(str(tmp_path))
    (tmp_path / "null").touch()
    assert not gpu_devices(str(tmp_path))
    (tmp_path / "nvidiactl").touch()
    assert gpu_devices(str(tmp_path))
    assert not gpu_devices(str(tmp_path / "absent"))
