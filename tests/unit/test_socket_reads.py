"""Which blocked threads read a socket with no timer: each of their wake-ups is bytes.

``/proc/PID/io`` counts read(2)/write(2) only, never recv/send (measured here: 100 send/recv
pairs of 100 bytes moved syscr by 2). A thread asleep in a blocking recv, or in CPython's
poll() on its socket for a timeout longer than any window, wakes only when bytes come; a
short poll timeout is a timed re-check, and ppoll's timeout is a pointer hangscope does not
read.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.progress import PROGRESSING, STUCK, decide, decide_all
from hangscope.analyze.evidence.progress_hints import Hints, socket_readers
from hangscope.model import VerdictKind
from hangscope.model.progress import (
    CounterDelta,
    IoDelta,
    ProcessProgress,
    ProgressEvidence,
    StackCount,
    ThreadProgress,
)
from hangscope.model.serialize import load
from hangscope.model.waits import FdRecord, KernelWaits, ProcessFds, TaskSyscall

FIXTURES = Path(__file__).parent.parent / "fixtures"

_FDS = (FdRecord(3, "socket:[901]", inode=901), FdRecord(4, "pipe:[902]", inode=902))
_NO_TIMEOUT = 0xFFFFFFFFFFFFFFFF  # poll's int -1 as the register holds it


def _readers(*calls: TaskSyscall, arch: str = "x86_64") -> frozenset[int]:
    return socket_readers(KernelWaits(arch, (ProcessFds(10, _FDS, calls),)))


def test_a_blocking_recv_of_a_socket_is_a_socket_read() -> None:
    assert _readers(TaskSyscall(11, 45, (3, 0, 64, 0, 0, 0))) == {11}  # recvfrom(3, ...)


def test_a_read_of_a_pipe_is_not() -> None:
    assert _readers(TaskSyscall(11, 0, (4, 0, 64, 0, 0, 0))) == frozenset()


def test_a_poll_for_input_on_the_socket_with_a_long_or_no_timeout_is() -> None:
    hour = TaskSyscall(11, 7, (0, 1, 3_600_000, 0, 0, 0), polled=((3, 1),))  # urlopen
    forever = TaskSyscall(12, 7, (0, 1, _NO_TIMEOUT, 0, 0, 0), polled=((3, 1),))
    assert _readers(hour, forever) == {11, 12}


def test_a_short_poll_a_ppoll_or_a_poll_of_a_pipe_is_not() -> None:
    short = TaskSyscall(11, 7, (0, 1, 50, 0, 0, 0), polled=((3, 1),))
    ppoll = TaskSyscall(12, 271, (0, 1, 0x7FFD0000, 0, 0, 0), polled=((3, 1),))
    pipe = TaskSyscall(13, 7, (0, 1, _NO_TIMEOUT, 0, 0, 0), polled=((4, 1),))
    assert _readers(short, ppoll, pipe) == frozenset()
    assert _readers(TaskSyscall(14, 73, (0, 1, 0, 0, 0, 0), polled=((3, 1),)),
                    arch="aarch64") == frozenset()  # ppoll: the only poll there


def _consumer(*stacks: StackCount) -> ProcessProgress:
    counters = CounterDelta(cpu_ns=4_000_000, runs=27, voluntary=25, involuntary=2)
    thread = ThreadProgress(10, "MainThread", sum(s.count for s in stacks), stacks, counters,
                            IoDelta(0, 0, 0, 0))
    return ProcessProgress(10, (thread,), IoDelta(0, 0, 0, 0), sampled=True)


def test_a_consumer_woken_on_its_recv_line_progresses() -> None:
    proc = _consumer(StackCount(("<module> (feed.py:11)",), 50))
    rank = decide(proc, 0.5, hints=Hints(socket_readers={10: ("<module>", 11)}))
    assert rank.decision == PROGRESSING, rank
    assert "a read of a socket with no timer, ended 25 times in 0.5 s" in rank.reason
    assert decide(proc, 0.5).decision == STUCK  # the counters alone: a poll


def test_a_loop_that_sleeps_most_and_reads_a_socket_between_still_polls() -> None:
    # a health check: its reads return bytes ("not ready"); what it polls says if that hangs
    proc = _consumer(StackCount(("wait_ready (launch.py:20)",), 40),
                     StackCount(("wait_ready (launch.py:18)", "readinto (socket.py:706)"), 10))
    rank = decide(proc, 0.5, hints=Hints(socket_readers={10: ("readinto", 706)}))
    assert rank.decision == STUCK and rank.reason.startswith("polling without progress"), rank


def test_a_loop_that_waits_most_in_its_socket_read_progresses() -> None:
    # an event loop whose synchronous fetch (urlopen, an hour's timeout) takes most of each
    # turn: the read it is in now is where it waited most, and it returned again and again
    proc = _consumer(StackCount(("main (svc.py:30)", "fetch (svc.py:14)",
                                 "SocketIO.readinto (socket.py:706)"), 35),
                     StackCount(("main (svc.py:30)", "EpollSelector.select (selectors.py:468)"),
                                15))
    rank = decide(proc, 0.5, hints=Hints(socket_readers={10: ("SocketIO.readinto", 706)}))
    assert rank.decision == PROGRESSING, rank
    assert decide(proc, 0.5).decision == STUCK  # the counters alone: a poll


def test_a_loop_that_sleeps_most_on_one_line_and_checks_a_store_on_another_still_polls() -> None:
    # ``while not store.check(keys): time.sleep(0.05)``: the check is a socket read of the
    # same function (a C++ call, no Python frame of its own), caught by the kernel's read at
    # line 81 while the window saw the sleep's line 82 most (CI, 2026-12-06)
    proc = _consumer(StackCount(("<module> (jobs.py:228)", "store_poll (jobs.py:82)"), 45),
                     StackCount(("<module> (jobs.py:228)", "store_poll (jobs.py:81)"), 5))
    rank = decide(proc, 0.5, hints=Hints(socket_readers={10: ("store_poll", 81)}))
    assert rank.decision == STUCK and rank.reason.startswith("polling without progress"), rank
    # by the function's name alone (as it was read before), the check's read passed for the
    # window's wait: "its waits complete and data moves"
    unknown = decide(proc, 0.5, hints=Hints(socket_readers={10: ("store_poll", None)}))
    assert unknown.decision == PROGRESSING, unknown


def test_a_poll_a_ptrace_stop_restarted_is_still_that_poll() -> None:
    """py-spy's pause interrupts a timed poll, which goes on as restart_syscall (219) with
    poll's registers; the collector read its fds because the wait channel said poll. A
    restarted ppoll (its timeout a pointer, a user address) stays unread."""
    hour = TaskSyscall(11, 219, (0, 1, 3_600_000, 0, 0, 0), polled=((3, 1),))
    assert _readers(hour) == {11}
    ppoll = TaskSyscall(11, 219, (0, 1, 0x7FFC_1234_5678, 0, 0, 0), polled=((3, 1),))
    assert _readers(ppoll) == frozenset()
    futex = TaskSyscall(11, 219, (0, 1, 3_600_000, 0, 0, 0))  # no fds: not a poll
    assert _readers(futex) == frozenset()


def test_a_healthy_loop_caught_in_a_restarted_poll_of_its_fetch_is_not_stuck() -> None:
    """CI's extended tier: an asyncio service fetching its config with a synchronous urlopen
    answered after 60 ms, caught in the poll py-spy's pause had restarted, read "polling
    without progress" and a wait chain to its own config thread; the window saw its loop
    back at its select 17 times in 44 samples."""
    snap = analyze(load(FIXTURES / "progress" / "loop_urlopen_slow_restarted.dump.json"))
    assert snap.verdict is not None and snap.verdict.kind in (
        VerdictKind.PROGRESSING, VerdictKind.IDLE), snap.verdict


def _client(main_parked: bool) -> tuple[ProcessProgress, Hints]:
    """A main thread asleep all window (``time.sleep(3600)`` after starting its threads) and
    a thread blocked in a long poll's recv whose reads ended twice (the answer, the next)."""
    asleep = ThreadProgress(10, "MainThread", 50, (StackCount(("clients (jobs.py:110)",), 50),),
                            CounterDelta(cpu_ns=0, runs=0, voluntary=0, involuntary=0),
                            IoDelta(0, 0, 0, 0))
    poll = ThreadProgress(11, "Thread-1", 50, (StackCount(
        ("run (threading.py:982)", "one_after_another (jobs.py:103)",
         "SocketIO.readinto (socket.py:706)"), 50),),
        CounterDelta(cpu_ns=2_000_000, runs=4, voluntary=4, involuntary=0), IoDelta(0, 0, 0, 0))
    proc = ProcessProgress(10, (asleep, poll), IoDelta(0, 0, 0, 0), sampled=True)
    return proc, Hints(socket_readers={11: ("SocketIO.readinto", 706)},
                       parked=frozenset({10} if main_parked else ()))


def test_a_sleeping_main_thread_leaves_the_verdict_to_its_threads_reading_sockets() -> None:
    # GIVEN a client process whose main thread sleeps while its threads long-poll a server
    proc, hints = _client(main_parked=True)
    # THEN the process progresses through the thread whose socket reads ended (bytes came)
    rank = decide_all(ProgressEvidence(2.0, 100, (proc,)), hints=hints)[0]
    assert rank.decision == PROGRESSING and rank.tid == 11, rank
    assert rank.reason.startswith("thread 11 (Thread-1), while thread 10 sleeps or joins"), rank
    assert "a read of a socket with no timer, ended 4 times" in rank.reason, rank


def test_a_main_thread_blocked_in_its_own_wait_is_judged_by_that_wait() -> None:
    # GIVEN the same threads, but the main thread blocked in a wait of its own (a collective,
    # a recv: not asleep, not joining): a helper's traffic beside it is no progress of its work
    proc, hints = _client(main_parked=False)
    rank = decide_all(ProgressEvidence(2.0, 100, (proc,)), hints=hints)[0]
    assert rank.decision == STUCK and rank.tid == 10, rank
    assert rank.reason.startswith("blocked: one stack in 50 samples"), rank


def test_a_loop_sampled_sending_through_its_transport_moved_socket_data() -> None:
    # a server's answer: a handler's ``transport.write`` with nothing buffered sends at once
    # (uvicorn's h11 answering a request); a loop woken again and again, caught there once
    loop = ("main (api.py:83)", "BaseEventLoop.run_forever (asyncio/base_events.py:607)")
    write = StackCount((*loop, "RequestResponseCycle.send (uvicorn/protocols/http/h11_impl.py:486)",
                        "_SelectorSocketTransport.write (asyncio/selector_events.py:1057)"), 1)
    idle = StackCount((*loop, "EpollSelector.select (selectors.py:468)"), 49)
    rank = decide(_consumer(idle, write), 0.5)
    assert rank.decision == PROGRESSING and rank.evidence == "socket", rank
    assert "_SelectorSocketTransport.write (asyncio/selector_events.py:1057)" in rank.reason
    assert decide(_consumer(idle, replace(write, frames=write.frames[:3])), 0.5
                  ).decision == STUCK  # caught in its handler only: no send seen
