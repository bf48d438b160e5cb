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


# py-spy --nonblocking of a process inside torch.compile (CI, 2026-12-06): the unwind gave up
# ten frames in, and the compile's frames below were lost; another round's read was whole.
_TORN = (Frame("proxy_call", "/v/torch/fx/experimental/proxy_tensor.py", 1332),
         Frame("ProxyTorchDispatchMode.__torch_dispatch__",
               "/v/torch/fx/experimental/proxy_tensor.py", 2007),
         Frame("count.<locals>.wrapper", "/v/torch/utils/_stats.py", 29))
_WHOLE = (Frame("compile_fx", "/v/torch/_inductor/compile_fx.py", 2300),
          Frame("_compile", "/v/torch/_dynamo/convert_frame.py", 1100),
          Frame("train", "/job/compile_job.py", 40),
          Frame("<module>", "/job/compile_job.py", 60))


def _read(frames: tuple[Frame, ...], native: bool = False) -> pyspy.DumpResult:
    return pyspy.DumpResult(PID, (pyspy.PyThread(PID, "MainThread", True, True, frames),),
                            native=native)


def _merged_reads(*dumps: pyspy.DumpResult) -> Process:
    info = procfs.ProcInfo(PID, state="R", tasks=(_task(PID, "R", None, 100),))
    rounds = [{PID: Round(dump, info)} for dump in dumps]
    window = Window(seconds=1.0, cpu_before={PID: 1.0}, cpu_after={PID: 2.0})
    return merge_rounds(Process(PID), rounds, window)


def test_a_stack_torn_by_an_unpaused_read_gives_way_to_a_whole_one() -> None:
    merged = _merged_reads(_read(_TORN), _read(_WHOLE), _read(_TORN))
    assert merged.threads[0].frames == _WHOLE


def test_a_native_dump_still_comes_first_and_a_torn_stack_stands_alone() -> None:
    native = (Frame("__poll", "libc.so.6", native=True), *_WHOLE)
    assert _merged_reads(_read(_WHOLE), _read(native, native=True)).threads[0].frames == native
    assert _merged_reads(_read(_TORN)).threads[0].frames == _TORN
