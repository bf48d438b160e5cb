"""Whether a framework's producer process runs a task now, from the frameworks' own loops and
method frames: the predicates the object edges (analyze/graph/objectedges.py) and the patterns
over them share (a worker between tasks holds up nobody; a get on it waits for a result on its
way).
"""

from __future__ import annotations

from hangscope.frameworks import OBJECT_WAITS, in_task_loop, runs_method, titled_method
from hangscope.model import Process, Thread


def idle_producer(proc: Process, going: frozenset[int]) -> bool:
    """Between tasks when sampled, and not seen running any by the window (``going``: the
    PIDs it saw progress): a worker that computes step after step sits in the loop for its
    next task between them, and a stack sample may catch it there."""
    return proc.pid not in going and between_tasks(proc)


def between_tasks(proc: Process) -> bool:
    """The producer's process runs no task: its working thread is in the framework's loop
    for the next one (:func:`in_task_loop_now`); or (a threaded producer, Ray's
    ``max_concurrency``, whose idle pool thread may be the working one) a thread is in that
    loop, none runs a method, nor does its title name one in flight (an async actor's
    method suspended on an await is on no stack: ``ray::Queue.get``)."""
    if in_task_loop_now(proc.working_thread):
        return True
    return any(in_task_loop_now(t) for t in proc.threads) and not titled_method(proc.title) \
        and not any(runs_method(f.name, f.file) for t in proc.threads for f in t.frames)


def in_task_loop_now(thread: Thread | None) -> bool:
    """The thread's innermost Python frame is the framework's loop for the next task, and no
    native frame inside that loop runs one (a generator task's Python frame is suspended
    between its yields: ``running_native``)."""
    if thread is None:
        return False
    inner = []
    for frame in thread.frames:
        if not frame.native:
            return in_task_loop(frame.name, frame.file) and not any(
                run in f.name for w in OBJECT_WAITS for run in w.running_native for f in inner)
        inner.append(frame)
    return False
