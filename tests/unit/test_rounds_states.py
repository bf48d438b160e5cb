"""The thread states a merged process reports are the ones its stacks were read in.

A blocking py-spy dump stops every thread; one asleep in a syscall is woken into the stop and,
let go, stays runnable until it is back in its syscall. On a loaded machine the read of /proc
after the dump catches it there (CI: a thread blocked in a pipe read under the GIL read "runs
on CPU", and the GIL deadlock was missed). The states read just before the pause stand.
"""

from __future__ import annotations

from hangscope.collect import procfs, pyspy
from hangscope.live.rounds import Round, Window, merge_rounds
from hangscope.model import Frame, Process

PID = 4242
_FRAMES = (Frame(name="gil_child", file="/job/thread_jobs.py", line=150),)


def _task(tid: int, state: str, wchan: str | None, cpu: int) -> procfs.TaskInfo:
    return procfs.TaskInfo(tid, "python", state, wchan, sched=(cpu, 10, 0))


def _merged(before: procfs.TaskInfo, after: procfs.TaskInfo, paused: bool) -> Process:
    dump = pyspy.DumpResult(PID, (pyspy.PyThread(PID, "MainThread", False, True, _FRAMES),),
                            native=True)
    info = procfs.ProcInfo(PID, state="S", tasks=(after,))
    at_dump = (before,) if paused else info.tasks
    rounds = [{PID: Round(dump, info, at_dump=at_dump)}]
    window = Window(seconds=0.5, cpu_before={PID: 1.0}, cpu_after={PID: 1.0})
    return merge_rounds(Process(PID), rounds, window)


def test_a_thread_the_pause_left_runnable_keeps_the_state_it_was_read_in() -> None:
    merged = _merged(_task(PID, "S", "pipe_read", 100), _task(PID, "R", None, 120), True)
    (thread,) = merged.threads
    assert (thread.state, thread.wchan) == ("S", "pipe_read"), thread


def test_a_thread_that_runs_without_a_pause_is_read_as_running() -> None:
    merged = _merged(_task(PID, "R", None, 100), _task(PID, "R", None, 120), False)
    assert (merged.threads[0].state, merged.threads[0].wchan) == ("R", None)


def test_a_thread_that_was_running_before_the_pause_stays_running() -> None:
    merged = _merged(_task(PID, "R", None, 100), _task(PID, "R", None, 120), True)
    assert merged.threads[0].state == "R"


def test_a_thread_asleep_on_a_new_wait_after_the_pause_is_read_there() -> None:
    merged = _merged(_task(PID, "S", "pipe_read", 100), _task(PID, "S", "futex_wait", 120),
                     True)
    assert merged.threads[0].wchan == "futex_wait"
