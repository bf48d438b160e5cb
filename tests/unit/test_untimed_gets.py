"""A framework's object get with no timeout (``ray.get(refs)``) returns only once its objects
came: the program's line that calls it says so (collect/framework_lines.py ``Frame.untimed``),
and the progress window judges by it (analyze/evidence/progress_sites.py).

GIVEN a driver looping ``ray.get(actor.run.remote())`` (its gets return, the next round is
submitted: samples in and out of the get) THEN progressing, whatever its kernel counters say
(Ray's gRPC traffic is not in /proc/PID/io, so its loop read as a timed poll). GIVEN the same
window without the source's word THEN still the counters' timed poll. GIVEN a get with no
timeout held all window THEN blocked, not "a timed wait that re-checks": Ray's own wake-ups
inside the get are not the program's timer. GIVEN a threaded actor (``max_concurrency`` > 1)
whose main thread idles in Ray's task loop while its pool threads run methods THEN it is judged
by the thread that runs them, not called idle. The stacks are real ones, from py-spy record of
tests/targets/frameworks/ray_jobs.py ``callback_concurrent`` (Ray 2.60). And a sleep no loop
of the program's own goes round (a rate limiter's, one per item of a ``for``) ends with the
next call or item: its wake-ups are no poll's (progress_hints.sleep_once).
"""

from __future__ import annotations

import ast
from pathlib import Path

from hangscope.analyze.evidence.progress import IDLE, PROGRESSING, STUCK, decide
from hangscope.analyze.evidence.progress_hints import Hints, hints_of, sleep_once
from hangscope.analyze.evidence.progress_sites import held_in_get, returned_gets
from hangscope.collect.framework_lines import untimed_at, untimed_calls, untimed_in
from hangscope.model import NO_LOOP, WALK, WHILE, Category, Frame, Process, Thread
from hangscope.model.progress import (
    CounterDelta,
    IoDelta,
    ProcessProgress,
    StackCount,
    ThreadProgress,
)

_ENTRY = ("<module> (ray_jobs.py:265)", "main (ray_jobs.py:236)")
_IN_GET = (*_ENTRY,
           "wrap_auto_init.<locals>.auto_init_wrapper (ray/_private/auto_init_hook.py:22)",
           "client_mode_hook.<locals>.decorator.<locals>.wrapper "
           "(ray/_private/client_mode_hook.py:134)",
           "get (ray/_private/worker.py:3009)",
           "Worker.get_objects (ray/_private/worker.py:1007)")
_SUBMITTING = (*_ENTRY, "ActorMethod.remote (ray/actor.py:945)",
               "wrap_auto_init.<locals>.auto_init_wrapper (ray/_private/auto_init_hook.py:22)",
               "ActorMethod._remote (ray/actor.py:1178)",
               "Signature._bind (inspect.py:3160)")
_UNTIMED = frozenset({("main", "ray_jobs.py", 236)})
#: Measured on the driver of that job over 3.6 s: 157 ms of CPU, woken 312 times, and no
#: read or write /proc/PID/io counts (its traffic is gRPC's sendmsg/recvmsg).
_COUNTERS = CounterDelta(cpu_ns=156_835_472, runs=531, voluntary=312, involuntary=213,
                         ticks=16, state="S", queued_ns=29_616_688)
_SILENT = IoDelta(syscr=0, syscw=0, rchar=0, wchar=0)


def _driver(*stacks: tuple[tuple[str, ...], int]) -> ProcessProgress:
    thread = ThreadProgress(tid=9026, name="MainThread", samples=sum(n for _, n in stacks),
                            stacks=tuple(StackCount(f, n) for f, n in stacks),
                            counters=_COUNTERS, io=_SILENT)
    return ProcessProgress(pid=9026, threads=(thread,), io=_SILENT, sampled=True)


def test_the_source_says_which_gets_have_no_timeout(tmp_path: Path) -> None:
    source = ("import ray\n"
              "ray.get(refs)\n"
              "ray.get(refs, timeout=5)\n"
              "ray.get(refs, **options)\n"
              "ray.wait(\n"
              "    refs)\n"
              "ray.wait(refs, num_returns=1, timeout=None)\n")
    calls = untimed_calls(ast.parse(source))
    assert "get" in calls[2] and "get" not in calls.get(3, frozenset())
    assert "get" not in calls.get(4, frozenset()), "a **kwargs may carry a timeout"
    assert "wait" in calls[5], "a call spread over lines is read at its first line"
    # A timeout of None is no timeout, but only the words are read: said timed, never guessed
    assert "wait" not in calls.get(7, frozenset())
    path = tmp_path / "driver.py"
    path.write_text(source)
    assert untimed_at(str(path), 2) == ("get",)
    assert untimed_at(str(path), 3) == ()
    assert untimed_at("/usr/lib/python3/site-packages/ray/x.py", 2) == ()


def test_a_loop_says_which_of_its_lines_get_with_no_timeout(tmp_path: Path) -> None:
    path = tmp_path / "driver.py"
    path.write_text("import ray, time\n"
                    "while True:\n"
                    "    ray.get(actor.count.remote())\n"
                    "    ray.get(ref, timeout=1)\n"
                    "    time.sleep(0.2)\n"
                    "ray.get(last)\n")
    assert untimed_in(str(path), ((2, 5),)) == (3,)  # not the timed get, not the line after
    assert untimed_in(str(path), ()) == ()
    assert untimed_in("/usr/lib/python3/site-packages/ray/x.py", ((2, 5),)) == ()


def test_a_driver_caught_in_its_sleep_between_untimed_gets_progresses() -> None:
    """The dump caught the sleep: the loop's get line (``Frame.loop_gets``) is what the window
    saw it return from (it read "all waiting")."""
    sleeping = ((*_ENTRY[:1], "main (ray_jobs.py:238)"), 280)
    proc = _driver(sleeping, (_IN_GET, 21))
    frame = Frame("main", "ray_jobs.py", 238, loops=((235, 238),), loop_kind=WHILE,
                  loop_gets=(236,))
    hints = hints_of([Process(pid=9026, threads=(Thread(tid=9026, frames=(frame,)),))])
    assert hints.untimed[9026] == _UNTIMED
    assert decide(proc, 3.6, hints=hints).decision == PROGRESSING


def test_a_driver_whose_untimed_get_returns_and_goes_on_progresses() -> None:
    proc = _driver((_IN_GET, 289), (_SUBMITTING, 12))
    thread = proc.threads[0]
    assert returned_gets(thread, _UNTIMED) == (
        "Worker.get_objects (called from main (ray_jobs.py:236))",)
    decided = decide(proc, 3.6, hints=Hints(untimed={9026: _UNTIMED}))
    assert decided.decision == PROGRESSING, decided
    assert "a get with no timeout" in decided.reason and "main (ray_jobs.py:236)" \
        in decided.reason, decided.reason
    # Without the source's word the window alone reads a timed poll, as before
    assert decide(proc, 3.6).decision == STUCK


def test_one_stray_sample_outside_the_get_is_no_return() -> None:
    proc = _driver((_IN_GET, 300), (_SUBMITTING, 1))
    assert returned_gets(proc.threads[0], _UNTIMED) == ()
    held = held_in_get(proc.threads[0], _UNTIMED)
    assert held == "Worker.get_objects (called from main (ray_jobs.py:236))"
    decided = decide(proc, 3.6, hints=Hints(untimed={9026: _UNTIMED}))
    assert decided.decision == STUCK and decided.wakes == 0, decided
    assert decided.reason.startswith("blocked: in Worker.get_objects"), decided.reason
    assert "not a timer of the program's" in decided.reason


def test_a_get_from_a_line_with_a_timeout_is_no_proof() -> None:
    proc = _driver((_IN_GET, 289), (_SUBMITTING, 12))
    timed = frozenset({("main", "ray_jobs.py", 240)})  # another line is the untimed one
    assert returned_gets(proc.threads[0], timed) == ()
    assert held_in_get(proc.threads[0], timed) is None
    assert decide(proc, 3.6, hints=Hints(untimed={9026: timed})).decision == STUCK


_EXECUTOR = ("FunctionActorManager._make_actor_method_executor.<locals>."
             "actor_method_executor (ray/_private/function_manager.py:740)")
_METHOD = (_EXECUTOR,
           "_inject_tracing_into_class.<locals>.span_wrapper.<locals>._resume_span "
           "(ray/util/tracing/tracing_helper.py:487)",
           "ShardCoordinator.run (ray_jobs.py:116)",
           "RemoteFunction._remote (ray/remote_function.py:574)")
_METHOD_GET = (_EXECUTOR,
               "_inject_tracing_into_class.<locals>.span_wrapper.<locals>._resume_span "
               "(ray/util/tracing/tracing_helper.py:487)",
               "ShardCoordinator.run (ray_jobs.py:119)",
               "get (ray/_private/worker.py:3009)",
               "Worker.get_objects (ray/_private/worker.py:1007)")


def _threaded_actor(*pool: tuple[tuple[str, ...], int]) -> ProcessProgress:
    main = ThreadProgress(tid=9220, name="MainThread", samples=218, stacks=(StackCount(
        ("<module> (ray/_private/workers/default_worker.py:323)",
         "Worker.main_loop (ray/_private/worker.py:1069)"), 218),),
        counters=CounterDelta(cpu_ns=2_000_000, runs=10, voluntary=10, involuntary=0, ticks=0),
        io=_SILENT)
    worker = ThreadProgress(tid=9289, name="Dummy-4", samples=sum(n for _, n in pool),
                            stacks=tuple(StackCount(f, n) for f, n in pool),
                            counters=CounterDelta(cpu_ns=112_250_746, runs=668, voluntary=245,
                                                  involuntary=411, ticks=11, state="S"),
                            io=_SILENT)
    return ProcessProgress(pid=9220, threads=(main, worker), io=_SILENT, sampled=True)


def test_a_threaded_actor_is_judged_by_the_thread_that_runs_its_methods() -> None:
    # Measured: 171 samples between calls (no Python frame), the rest in ShardCoordinator.run
    proc = _threaded_actor(((), 171), (_METHOD_GET, 25), (_METHOD, 22))
    decided = decide(proc, 2.2)
    assert decided.tid == 9289 and decided.decision != IDLE, decided
    # Its method's get has no timeout (ray_jobs.py:119 ``sum(ray.get(refs))``): it returned
    # and the method went on to start the next tasks
    untimed = Hints(untimed={9289: frozenset({("ShardCoordinator.run", "ray_jobs.py", 119)})})
    decided = decide(proc, 2.2, hints=untimed)
    assert decided.tid == 9289 and decided.decision == PROGRESSING, decided


def test_a_threaded_actor_whose_pool_runs_nothing_is_idle() -> None:
    proc = _threaded_actor(((), 218))
    decided = decide(proc, 2.2)
    assert decided.decision == IDLE and decided.tid == 9220, decided


def _sleeper(*frames: Frame) -> Thread:
    return Thread(tid=7, frames=(Frame("clock_nanosleep", "libc.so.6", native=True), *frames),
                  category=Category.SLEEP)


def test_a_sleep_no_loop_of_the_program_goes_round_ends_with_a_call_or_an_item() -> None:
    """progress_hints.sleep_once: blind round 21's 07 (a rate limiter's one-shot sleep in an
    actor's method) and 08 (a sleep per item of slow storage, under a for over the loader)."""
    method = Frame("RateLimited.embed", "/srv/app/jobs.py", 145, loop_kind=NO_LOOP)
    executor = Frame("actor_method_executor",
                     "/venv/lib/python3.11/site-packages/ray/_private/function_manager.py", 740)
    assert sleep_once(_sleeper(method, executor)) == (
        "at RateLimited.embed (jobs.py:145), in no loop of its own code")
    item = Frame("Holdout.__getitem__", "/srv/app/train.py", 34, loop_kind=NO_LOOP)
    evaluate = Frame("evaluate", "/srv/app/train.py", 47, loops=((46, 53),), loop_kind=WALK)
    assert sleep_once(_sleeper(item, evaluate)) == (
        "at Holdout.__getitem__ (train.py:34), inside a for loop over items (train.py:46-53)")
    # a poll: a while goes round the sleep, re-checking
    poll = Frame("wait_ready", "/srv/app/jobs.py", 160, loops=((159, 160),), loop_kind=WHILE)
    assert sleep_once(_sleeper(poll)) is None
    # a frame whose source was not read (captured elsewhere) proves no absence of a loop
    assert sleep_once(_sleeper(Frame("train", "/gone/watch21.py", 53))) is None
    # a library's own timer (a launcher's monitor loop) is not the program's sleep
    assert sleep_once(_sleeper(executor)) is None
