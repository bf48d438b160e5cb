"""A compile in progress: what compiles, since when, and how many helpers work on it.

Pure functions over the model; no I/O. A process in jit_compile (Dynamo/Inductor/Triton frames)
is the one doing the work; its helpers are the Inductor compile workers
(``compile_worker/__main__.py --parent=PID`` and the pool they fork) and the compilers it runs
(g++/cc1plus for Inductor's C++ on CPU, ptxas for Triton), found among its descendants.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangscope.model import Category, Frame, Process, Role
from hangscope.words import program, who

# The innermost compile frame says the stage; first match wins (innermost first).
_STAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"triton/"), "Triton compile"),
    (re.compile(r"torch/_inductor/(?:codecache|async_compile|cpp_builder)\.py"),
     "kernel build"),
    (re.compile(r"torch/_inductor/(?:graph|lowering|ir|scheduler|codegen/)"), "Inductor lowering"),
    (re.compile(r"torch/_functorch/"), "AOT autograd"),
    (re.compile(r"torch/_dynamo/"), "Dynamo tracing"),
)
_BUSY_CPU = 10.0  # percent over the window: a worker that does more than wait
#: Waits for another process's build of the same kernel, polled, and how each is said:
#: torch's FileBaton (the ``lock`` file cpp_extension creates in the extension's build
#: directory, O_EXCL, removed when the build ends) and the filelock package's polling acquire.
#: (No angle brackets in the words: Markdown reads "<extension>" as a tag and drops it.)
_BUILD_LOCKS = (
    (re.compile(r"torch/utils/file_baton\.py$"),
     "torch's JIT build lock (FileBaton: a file named lock in the extension's build "
     "directory, under TORCH_EXTENSIONS_DIR, by default ~/.cache/torch_extensions)"),
    (re.compile(r"/filelock/"), "a build's file lock (filelock)"),
)


@dataclass(frozen=True)
class CompileActivity:
    """One process compiling, and its helpers."""

    pid: int
    site: str | None  # the user's call that triggered the compile
    stage: str | None  # Dynamo tracing | AOT autograd | Inductor lowering | kernel build | ...
    since: float | None  # epoch seconds: the oldest compile helper's start (a lower bound)
    workers: int  # Inductor compile workers
    busy_workers: int  # of those, busy on CPU in the window
    compilers: tuple[str, ...]  # compiler programs running under it: g++, cc1plus, ptxas
    # The build lock it polls, off CPU, for another process's build (none here), in words
    build_lock: str | None = None


def _descendants(pid: int, by_parent: dict[int | None, list[Process]]) -> list[Process]:
    out, todo = [], [pid]
    while todo:
        for child in by_parent.get(todo.pop(), ()):
            out.append(child)
            todo.append(child.pid)
    return out


def _stage(proc: Process) -> str | None:
    thread = proc.working_thread
    for frame in thread.frames if thread else ():
        if frame.native or not frame.file:
            continue
        for pattern, stage in _STAGES:
            if pattern.search(frame.file):
                return stage
    return None


def compile_activity(processes: Sequence[Process]) -> tuple[CompileActivity, ...]:
    """Every non-helper process whose working thread compiles, with its helpers."""
    by_parent: dict[int | None, list[Process]] = {}
    for proc in processes:
        by_parent.setdefault(proc.ppid, []).append(proc)
    out = []
    for proc in processes:
        thread = proc.working_thread
        if proc.role in (Role.COMPILE_WORKER, Role.COMPILER) or thread is None or (
                thread.category is not Category.JIT_COMPILE):
            continue
        below = _descendants(proc.pid, by_parent)
        workers = [p for p in below if p.role is Role.COMPILE_WORKER]
        pool = [p for p in workers if p.ppid != proc.pid] or workers  # the forked pool
        compilers = [p for p in below if p.role is Role.COMPILER and not p.is_exited]
        busy = sum(1 for p in pool if (p.cpu_percent or 0.0) > _BUSY_CPU)
        starts = [p.create_time for p in workers + compilers if p.create_time]
        out.append(CompileActivity(proc.pid, thread.site, _stage(proc),
                                   min(starts) if starts else None, len(pool), busy,
                                   tuple(program(p) for p in compilers),
                                   _build_lock(thread.frames) if thread.state != "R" else None))
    return tuple(out)


def describe_compile(activity: CompileActivity, processes: Sequence[Process],
                     now: float | None = None) -> str:
    """``the main process (PID 9) compiles (Inductor lowering) for compile_rank (x.py:138), for at
    least 41 s; 0 of 2 compile workers busy; running g++, cc1plus``."""
    proc = next(p for p in processes if p.pid == activity.pid)
    text = f"{who(proc)} compiles"
    if activity.stage:
        text += f" ({activity.stage})"
    if activity.site:
        text += f" for {activity.site}"
    if activity.since is not None and now is not None and now >= activity.since:
        text += f", for at least {now - activity.since:.0f} s"
    if activity.workers:
        text += f"; {activity.busy_workers} of {activity.workers} compile workers busy"
    if activity.compilers:
        text += f"; running {', '.join(activity.compilers)}"
    return text


def _build_lock(frames: Sequence[Frame]) -> str | None:
    """The build lock (FileBaton.wait, filelock) the stack polls inside its compile, in
    words; None where it polls none."""
    return next((words for f in frames if not f.native and f.file
                 for pattern, words in _BUILD_LOCKS if pattern.search(f.file)), None)
