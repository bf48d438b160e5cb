"""What the performance work must not break: a refresh shows what the job does *now*.

The speed itself is measured by ``benchmarks/bench.py`` (docs/performance.md), never by a timed
test. These tests check the behaviour behind the speed on real hung processes:

- a refresh reuses stacks only while nothing changed, and shows a rank's new stack once it moved
  (a real rank, moved out of its barrier by a signal the test sends);
- what each refresh runs: no native dump while the Python stacks, thread states and wchans are
  unchanged, no py-spy at all once the scheduler's counters prove that nothing ran, and never a
  pausing dump in ``--nonblocking`` mode;
- native dumps run at most one per core at a time;
- discovery's single /proc pass sees the same tree as psutil;
- the synthetic job generator (benchmarks/synthetic.py) is diagnosed right, and the analysis
  memo gives the same result for raw and already-classified input, run after run.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil
import pytest
import support

from hangscope.collect import procfs, pyspy, tree
from hangscope.live.rounds import Marks
from hangscope.live.sampler import SampleOptions, Sampler, _native_slots
from hangscope.model import Process, Snapshot

QUICK = SampleOptions(samples=1, window=0.0)


@pytest.fixture
def barrier(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Factory: ``barrier(ranks, **kw) -> DemoJob`` of benchmarks/barrier_job.py, killed after."""
    from benchmarks.jobs import barrier_job

    with ExitStack() as stack:
        yield lambda ranks, **kw: stack.enter_context(barrier_job(ranks, **kw))


@pytest.fixture
def dumps(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every py-spy run hangscope makes: pid, native, nonblocking, start and end time."""
    calls: list[dict[str, Any]] = []
    real = pyspy.dump

    def spy(pid: int, native: bool = True, timeout: float = 10.0, nonblocking: bool = False,
            pyspy: str | None = None) -> pyspy.DumpResult:
        call = {"pid": pid, "native": native, "nonblocking": nonblocking,
                "start": time.monotonic()}
        try:
            return real(pid, native=native, timeout=timeout, nonblocking=nonblocking,
                        pyspy=pyspy)
        finally:
            call["end"] = time.monotonic()
            calls.append(call)

    monkeypatch.setattr(pyspy, "dump", spy)
    return calls


def working_names(snap: Snapshot, pid: int) -> list[str]:
    proc = snap.process(pid)
    assert proc is not None and proc.working_thread is not None, proc
    return [f.name for f in proc.working_thread.frames if not f.native]


def ranks_of(snap: Snapshot) -> list[Process]:
    return [p for p in snap.processes if p.role.value == "rank"]


def settle(pids: list[int]) -> None:
    """Wait until the ranks' threads sleep (a rank that just moved is still running)."""
    support.poll(lambda: all(t.state == "S" for pid in pids for t in procfs.read_tasks(pid)),
                 f"the threads of {pids} to sleep", 10, interval=0.02)


# -- refresh correctness ------------------------------------------------------------------

@pytest.mark.extended
@pytest.mark.parametrize("native", [True, False], ids=["native", "python-only"])
def test_given_a_rank_that_moves_when_refreshed_then_its_new_stack_shows(
        barrier: Any, dumps: list[dict[str, Any]], native: bool) -> None:
    job = barrier(3, move_on_usr1=True)
    mover, still = job.pid_of("rank0"), job.pid_of("rank1")
    sampler = Sampler(job.pid, SampleOptions(samples=1, window=0.0, native=native))
    first = sampler.snapshot()
    assert "Barrier.wait" in working_names(first, mover)
    assert "moved_on" not in working_names(first, mover)
    settle(job.ready_pids)
    second = sampler.snapshot()  # unchanged: same stacks, now known exact
    third = sampler.snapshot()  # unchanged: no py-spy at all
    for snap in (second, third):
        assert working_names(snap, mover) == working_names(first, mover)
        assert snap.verdict is not None and snap.verdict.kind.value == "all_waiting"

    os.kill(mover, signal.SIGUSR1)  # the test moves the rank; hangscope never signals
    def refreshed() -> Snapshot | None:
        snap = sampler.snapshot()
        return snap if "moved_on" in working_names(snap, mover) else None

    # The signal handler runs when the rank next gets the GIL: refresh until it shows.
    moved = support.poll(refreshed, "the moved rank's new stack in a refresh", 10, 0.1)
    assert "moved_on" not in working_names(moved, still)
    proc = moved.process(mover)
    assert proc is not None and proc.native_sampled is native
    settle(job.ready_pids)
    later = sampler.snapshot()  # and the new stack stays, refresh after refresh
    assert "moved_on" in working_names(later, mover)
    assert "moved_on" not in working_names(later, still)


def test_given_an_unchanged_job_when_refreshed_then_no_native_dump_and_then_no_pyspy(
        barrier: Any, dumps: list[dict[str, Any]]) -> None:
    job = barrier(4)
    sampler = Sampler(job.pid, QUICK)
    cold = sampler.snapshot()
    python = [p.pid for p in cold.processes if p.python]
    assert sorted(c["pid"] for c in dumps if c["native"]) == sorted(python)
    assert all(p.native_sampled for p in cold.processes if p.python)
    settle(python)

    dumps.clear()
    refresh = sampler.snapshot()
    assert not [c for c in dumps if c["native"] or not c["nonblocking"]], dumps
    assert all(p.native_sampled for p in refresh.processes if p.python)  # kept, not re-taken
    for proc in ranks_of(cold):
        assert working_names(refresh, proc.pid) == working_names(cold, proc.pid)

    dumps.clear()
    steady = sampler.snapshot()
    assert dumps == []  # the scheduler's counters show nothing ran: no py-spy, no pause
    for proc in ranks_of(cold):
        assert working_names(steady, proc.pid) == working_names(cold, proc.pid)
        assert steady.process(proc.pid).native_sampled  # type: ignore[union-attr]


def test_given_several_samples_then_only_the_first_round_pauses_the_ranks(
        barrier: Any, dumps: list[dict[str, Any]]) -> None:
    job = barrier(2)
    settle(job.ready_pids)
    snap = Sampler(job.pid, SampleOptions(samples=3, window=0.6)).snapshot()
    blocking = [c for c in dumps if not c["nonblocking"]]
    python = [p.pid for p in snap.processes if p.python]
    assert sorted(c["pid"] for c in blocking) == sorted(python)  # one native dump each
    assert all(c["native"] for c in blocking)
    for proc in ranks_of(snap):
        working = proc.working_thread
        assert working is not None and working.samples == 3 and working.stuck
    assert snap.verdict is not None and snap.verdict.kind.value == "all_waiting"


def test_given_nonblocking_then_no_dump_ever_pauses_a_target(
        barrier: Any, dumps: list[dict[str, Any]]) -> None:
    job = barrier(2)
    sampler = Sampler(job.pid, SampleOptions(samples=2, window=0.2, nonblocking=True))
    for _ in range(2):
        snap = sampler.snapshot()
        assert snap.verdict is not None and snap.verdict.kind.value == "all_waiting"
    assert dumps and all(c["nonblocking"] and not c["native"] for c in dumps)


def test_given_many_ranks_then_native_dumps_run_one_per_core_at_most(
        barrier: Any, dumps: list[dict[str, Any]]) -> None:
    job = barrier(6)
    Sampler(job.pid, QUICK).snapshot()
    native = sorted((c["start"], c["end"]) for c in dumps if c["native"])
    assert len(native) == 7
    most = max(sum(1 for s, e in native if s <= start < e) for start, _ in native)
    assert most <= _native_slots(QUICK)


# -- the scheduler marks -----------------------------------------------------------------

def task(tid: int, state: str = "S", sched: tuple[int, int, int] | None = (100, 5, 0),
         wchan: str | None = "futex_do_wait") -> procfs.TaskInfo:
    return procfs.TaskInfo(tid=tid, comm="python", state=state, wchan=wchan, sched=sched)


def test_marks_only_when_no_python_thread_ran_between_the_reads() -> None:
    before = [task(1), task(2), task(3, state="R", sched=(5, 1, 0))]  # 3: a busy native thread
    assert Marks.between(before, [task(1), task(2), task(3, "R", (9, 2))], {1, 2}) is not None
    assert Marks.between(before, [task(1, sched=(101, 6, 0)), task(2), task(3)], {1, 2}) is None
    assert Marks.between(before, [task(1), task(2), task(3)], {1, 3}) is None  # 3 ran
    assert Marks.between(before, [task(1), task(2)], {1, 2}) is None  # a thread ended
    assert Marks.between([task(1, sched=None)], [task(1, sched=None)], {1}) is None  # unknown
    assert Marks.between([task(1, "R")], [task(1, "R")], {1}) is None  # on a CPU: may move


def test_marks_still_until_a_python_thread_runs_or_the_threads_change() -> None:
    marks = Marks.between([task(1), task(2, "R")], [task(1), task(2, "R")], {1})
    assert marks is not None
    assert marks.still([task(1), task(2, "R", (7, 7))])  # the native thread may work
    assert not marks.still([task(1, sched=(100, 6, 0)), task(2, "R")])  # woke up, slept again
    assert not marks.still([task(1, state="R"), task(2, "R")])  # on a CPU right now
    assert not marks.still([task(1), task(2, "R"), task(4)])  # a new thread


def test_a_real_sleeping_thread_keeps_its_marks_and_a_ticking_one_does_not() -> None:
    stop = threading.Event()
    ticker = threading.Thread(target=lambda: [time.sleep(0.001) for _ in iter(stop.is_set, True)],
                              daemon=True)
    sleeper = threading.Thread(target=stop.wait, daemon=True)
    ticker.start()
    sleeper.start()
    try:
        time.sleep(0.05)

        def of(tid: int | None) -> list[procfs.TaskInfo]:
            return [t for t in procfs.read_tasks(os.getpid()) if t.tid == tid]

        first, second = of(sleeper.native_id), (time.sleep(0.05), of(sleeper.native_id))[1]
        if first[0].sched is None:
            pytest.skip("no /proc/PID/task/TID/schedstat on this kernel")
        assert first == second
        busy = of(ticker.native_id)
        time.sleep(0.05)
        assert busy[0].sched != of(ticker.native_id)[0].sched
    finally:
        stop.set()


def test_listening_sockets_through_netlink_are_those_of_proc_net() -> None:
    import socket
    import tempfile

    made = []
    try:
        for family, address in ((socket.AF_INET, ("127.0.0.1", 0)),
                                (socket.AF_INET6, ("::1", 0)),
                                (socket.AF_UNIX, tempfile.mktemp(prefix="hangscope-")),
                                (socket.AF_UNIX, "\0hangscope-abstract-test"),
                                (socket.AF_UNIX, "")):
            sock = socket.socket(family, socket.SOCK_STREAM)
            made.append(sock)
            sock.bind(address)
            sock.listen()
        for _ in range(5):  # other processes on the machine may open or close listeners
            netlink = procfs._listening_netlink()
            if netlink is None:
                pytest.skip("no sock_diag netlink here: /proc/net is read instead")
            if netlink == procfs.read_listening(procfs.PROC / "net"):
                break
        assert netlink == procfs.read_listening(procfs.PROC / "net")
        assert {os.fstat(s.fileno()).st_ino for s in made} <= set(netlink)
    finally:
        for sock in made:
            sock.close()


# -- discovery -----------------------------------------------------------------------------

def test_one_proc_pass_finds_the_tree_psutil_finds(barrier: Any) -> None:
    job = barrier(3)
    found = {f.pid: f for f in tree.walk(job.pid)}
    top = psutil.Process(job.pid)
    expected = [top, *top.children(recursive=True)]
    assert set(found) == {p.pid for p in expected}
    for proc in expected:
        info = found[proc.pid]
        assert info.ppid == proc.ppid()
        assert info.create_time == proc.create_time()
        assert info.status == proc.status()
        assert info.exe == proc.exe()
        assert set(info.children) == {c.pid for c in proc.children()}
    assert next(iter(found)) == job.pid  # parents before children
    fixed: tree.Fixed = {}
    again = tree.walk(job.pid, fixed=fixed)
    assert [f.environ for f in tree.walk(job.pid, fixed=fixed)] == [f.environ for f in again]
    assert len(fixed) == len(found)


# -- analysis at scale ---------------------------------------------------------------------

@pytest.mark.extended
@pytest.mark.parametrize("scenario", ["mismatch", "straggler", "all_waiting"])
def test_synthetic_jobs_get_the_right_diagnosis_raw_or_classified(scenario: str) -> None:
    from benchmarks import synthetic
    from hangscope.analyze import analyze
    from hangscope.model.serialize import dumps as to_json

    raw = analyze(synthetic.make_snapshot(1024, scenario))
    synthetic.check(raw, scenario)
    again = analyze(synthetic.make_snapshot(1024, scenario))
    merged = analyze(synthetic.make_snapshot(1024, scenario, classified=True))
    synthetic.check(merged, scenario)
    assert to_json(raw) == to_json(again) == to_json(merged)
    # Equal stacks end up as one tuple (what the call tree keys on); values are unchanged.
    mains = {id(p.working_thread.frames) for p in raw.processes}  # type: ignore[union-attr]
    assert len(mains) == (1 if scenario == "all_waiting" else 2)
