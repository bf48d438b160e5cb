"""collect/waits.py settled() on real processes: the kernel's syscall read again where it disagrees
with the dump's stack, kept where it agrees, and bounded where the thread never comes back."""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from hangscope.collect import waits as settle
from hangscope.collect.procfs import read_kernel_waits
from hangscope.model import Frame, Process, Socket, Thread
from hangscope.model.waits import TaskSyscall


def _asleep(argv: list[str]) -> Iterator[int]:
    """Run ``argv``, a program that sleeps; its PID once the kernel shows it in the sleep."""
    proc = subprocess.Popen(argv)
    nanosleep = settle._MAKES[platform.machine()]["clock_nanosleep"]
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            calls = read_kernel_waits([proc.pid]).processes[0].syscalls
            if calls and calls[0].nr in nanosleep:
                break
            time.sleep(0.01)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A process asleep in ``time.sleep`` (clock_nanosleep), ready once it is in it."""
    yield from _asleep([sys.executable, "-c", "import time; time.sleep(120)"])


def _dumped(pid: int, innermost: str) -> Process:
    thread = Thread(tid=pid, name="MainThread", state="S",
                    frames=(Frame(innermost, native=True), Frame("<module>", "<string>", 1)))
    return Process(pid=pid, threads=(thread,))


def test_given_libc_decorations_then_the_wrapper_is_named() -> None:
    assert settle.wrapper("__GI___poll") == "poll"
    assert settle.wrapper("__libc_recv") == "recv"
    assert settle.wrapper("read@GLIBC_2.2.5") == "read"
    assert settle.wrapper("__read_nocancel") == "read"
    assert settle.wrapper("epoll_wait") == "epoll_wait"


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_given_a_read_taken_at_another_moment_then_it_is_read_again(sleeper: int) -> None:
    kernel = read_kernel_waits([sleeper])
    (now,) = kernel.processes[0].syscalls
    # as if the read had caught it in a poll, while the dump's stack says clock_nanosleep
    stale = replace(kernel, processes=(replace(kernel.processes[0], syscalls=(
        TaskSyscall(sleeper, 7, (0, 1, 3600000, 0, 0, 0)),)),))
    again = settle.settled(stale, [_dumped(sleeper, "clock_nanosleep")])
    assert again.processes[0].syscalls == (now,)
    assert again.processes[0].fds == kernel.processes[0].fds


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_given_a_read_that_agrees_then_it_stands_and_costs_nothing(sleeper: int) -> None:
    kernel = read_kernel_waits([sleeper])
    assert settle.settled(kernel, [_dumped(sleeper, "__clock_nanosleep")]) is kernel


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_given_a_thread_that_never_comes_back_then_the_first_read_stands(sleeper: int) -> None:
    kernel = read_kernel_waits([sleeper])
    started = time.monotonic()
    again = settle.settled(kernel, [_dumped(sleeper, "__GI___poll")])
    took = time.monotonic() - started
    assert again is kernel
    assert settle.SETTLE_DEADLINE_S <= took < settle.SETTLE_DEADLINE_S + 1.0, took


@pytest.fixture
def native_sleeper() -> Iterator[int]:
    """``sleep 120``: a program py-spy cannot read, asleep in clock_nanosleep once started."""
    yield from _asleep(["sleep", "120"])


def _native(pid: int, state: str) -> Process:
    return Process(pid=pid, threads=(Thread(tid=pid, name="sleep", state=state, python=False),))


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_given_a_native_thread_caught_running_but_dumped_asleep_then_it_is_read_again(
        native_sleeper: int) -> None:
    # A redis-server wakes every 100 ms for its timer: a read at that moment finds it
    # running, and calm could not see its event loop wait for clients (CI, 2026-12-06).
    kernel = read_kernel_waits([native_sleeper])
    (now,) = kernel.processes[0].syscalls
    running = replace(kernel, processes=(replace(kernel.processes[0], syscalls=()),))
    again = settle.settled(running, [_native(native_sleeper, "S")])
    assert again.processes[0].syscalls == (now,)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_given_a_native_thread_dumped_running_then_its_read_stands(native_sleeper: int) -> None:
    kernel = read_kernel_waits([native_sleeper])
    running = replace(kernel, processes=(replace(kernel.processes[0], syscalls=()),))
    assert settle.settled(running, [_native(native_sleeper, "R")]) is running


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[int]:
    """A real redis-server on a free port, idle in its event loop (epoll over its listening
    socket); its PID once the kernel shows its main thread in that wait."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed: apt-get install redis-server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    epoll = settle._MAKES[platform.machine()]["epoll_wait"]
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            mine = read_kernel_waits([proc.pid]).process(proc.pid)
            call = mine.syscall(proc.pid) if mine is not None else None
            if call is not None and call.nr in epoll and any(
                    r.target.startswith("socket:") for r in mine.fds):
                break
            time.sleep(0.01)
        else:
            pytest.fail("redis-server never waited in its event loop")
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_given_a_native_servers_loop_dumped_running_then_it_is_read_again(
        redis_server: int) -> None:
    # Its loop runnable at the round's read of its state (a loaded machine queues it for
    # milliseconds after each 100 ms tick), its syscall unread: calm must still see it wait
    # in epoll over its listening socket (CI, 2026-12-07).
    kernel = read_kernel_waits([redis_server])
    mine = kernel.process(redis_server)
    assert mine is not None
    running = replace(kernel, processes=(replace(mine, syscalls=tuple(
        s for s in mine.syscalls if s.tid != redis_server)),))
    listener = Socket(kind="tcp", address="127.0.0.1", port=6379, inode=1)
    proc = Process(pid=redis_server, listening=(listener,), threads=(
        Thread(tid=redis_server, name="redis-server", state="R", python=False),))
    again = settle.settled(running, [proc])
    call = again.process(redis_server).syscall(redis_server)
    assert call is not None and call.nr in settle._MAKES[platform.machine()]["epoll_wait"]
    assert call.watched, call  # the fds its epoll waits on: what calm reads
