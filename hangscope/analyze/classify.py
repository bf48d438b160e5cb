"""Classify each thread (category, op, call site, context) and pick each process's working thread.

Pure functions over model data: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze.signatures import (
    ANYWHERE,
    CONTEXTS,
    HELPER_THREAD_FRAMES,
    HELPER_THREAD_NAMES,
    PLUMBING_FILES,
    SIGNATURES,
    Signature,
    op_from_name,
)
from hangscope.model import Category, Frame, Process, Thread

# Kernel wait channels, for threads py-spy cannot see or whose Python stack ends in a builtin.
_WCHAN_RULES: tuple[tuple[re.Pattern[str], Category], ...] = (
    (re.compile(r"futex"), Category.LOCK),
    (re.compile(r"nanosleep|hrtimer|msleep"), Category.SLEEP),
    (re.compile(r"epoll|poll_schedule|do_select|do_sys_poll|pipe_read|pipe_write|unix_stream|"
                r"sk_wait|inet_csk_accept|tcp_recv|wait_woken|do_wait|kernel_wait"),
     Category.IPC_WAIT),
    (re.compile(r"folio|page|nfs|rpc_wait|blk|io_schedule|jbd2|xfs|ext4"), Category.IO),
)

_STATE_CATEGORY = {"T": Category.STOPPED, "t": Category.STOPPED, "Z": Category.ZOMBIE,
                   "X": Category.DEAD}

# How much a category says about where a process is stuck: picks the working thread.
_SPECIFICITY = {
    Category.COLLECTIVE: 9, Category.COMM_INIT: 9, Category.CUDA_SYNC: 8,
    Category.CUDA_LAUNCH: 8, Category.JIT_COMPILE: 8, Category.GIL_WAIT: 7,
    Category.RUNNING: 6, Category.IO: 5, Category.LOCK: 4, Category.IPC_WAIT: 3,
    Category.SLEEP: 2, Category.IDLE: 1, Category.UNKNOWN: 0, Category.STOPPED: 10,
    Category.ZOMBIE: 10, Category.DEAD: 10,
}


def frame_text(frame: Frame) -> str:
    """How a Python frame is matched: ``function (path)``, as py-spy prints it."""
    return f"{frame.name} ({frame.file or ''})"


def _leaf(frames: Sequence[Frame]) -> Sequence[Frame]:
    """The innermost frames up to and including the first Python frame."""
    for i, frame in enumerate(frames):
        if not frame.native:
            return frames[: i + 1]
    return frames


def _match(sig: Signature, frames: Sequence[Frame]) -> Frame | None:
    scope = frames if sig.scope == ANYWHERE else _leaf(frames)
    for frame in scope:
        if frame.native:
            if sig.native is not None and sig.native.search(frame.name):
                return frame
        elif sig.python is not None and sig.python.search(frame_text(frame)):
            return frame
    return None


def call_site(frames: Sequence[Frame], below: Frame | None = None) -> str | None:
    """The first Python frame outside library plumbing, as ``function (file:line)``.

    Search starts at ``below`` (the matched frame) so the site is the caller of the blocking
    call, not a frame of an unrelated helper above it.
    """
    start = 0
    if below is not None:
        for i, frame in enumerate(frames):
            if frame is below:
                start = i
                break
    python = [f for f in frames[start:] if not f.native]
    for frame in python:
        if frame.file and PLUMBING_FILES.search(frame.file):
            continue
        return f"{frame.name} ({frame.location})"
    if python:
        return f"{python[0].name} ({python[0].location})"
    return None


def _op(sig: Signature, matched: Frame, frames: Sequence[Frame]) -> str | None:
    if sig.op:
        return sig.op
    if sig.category is not Category.COLLECTIVE:
        return None
    # The outermost collective frame names the op the user called (all_gather calls
    # all_gather_into_tensor internally, gloo's allreduce waits in a Work object).
    best = op_from_name(matched.name)
    for frame in frames:
        if not frame.native and frame.file and "distributed_c10d" in frame.file:
            op = op_from_name(frame.name)
            if op:
                best = op
    return best


def _context(frames: Sequence[Frame]) -> str | None:
    for label, pattern, _text in CONTEXTS:
        for frame in frames:
            text = frame.name if frame.native else frame_text(frame)
            if pattern.search(text):
                return label
    return None


def is_helper(thread: Thread) -> bool:
    """An always-there helper thread (watchdog, tqdm monitor, compile-pool reader, ...)."""
    if thread.name and HELPER_THREAD_NAMES.match(thread.name):
        return True
    return any(not f.native and f.file and HELPER_THREAD_FRAMES.search(f"({f.file})")
               for f in thread.frames)


def classify_thread(thread: Thread) -> Thread:
    """Give a thread its category, op, call site, context and hint."""
    helper = is_helper(thread)
    if thread.state in _STATE_CATEGORY:
        return replace(thread, category=_STATE_CATEGORY[thread.state], helper=helper,
                       hint="The thread is stopped (SIGSTOP or a debugger)."
                       if thread.state in "Tt" else None)
    frames = thread.frames
    context = _context(frames)
    for sig in SIGNATURES:
        matched = _match(sig, frames)
        if matched is None:
            continue
        category = sig.category
        hint = sig.hint
        # A thread that is still inside the Python code of a wait primitive but runs on CPU
        # is a spin-wait (libcuda, vLLM shm, sched_yield): a wait, so keep the category.
        return replace(thread, category=category, op=_op(sig, matched, frames),
                       site=call_site(frames, matched), context=context, hint=hint,
                       helper=helper)
    site = call_site(frames)
    if thread.wchan:
        for pattern, category in _WCHAN_RULES:
            if pattern.search(thread.wchan):
                return replace(thread, category=category, site=site, context=context,
                               helper=helper, hint=f"Kernel wait channel {thread.wchan}.")
    if thread.state == "D":
        return replace(thread, category=Category.IO, site=site, context=context, helper=helper,
                       hint="Uninterruptible sleep (state D): waiting on storage or a driver.")
    if (thread.active or thread.state == "R") and frames:
        return replace(thread, category=Category.RUNNING, site=site, context=context,
                       helper=helper, hint="Running on CPU in this code.")
    if not frames and thread.state == "S":
        return replace(thread, category=Category.IDLE, site=site, helper=helper)
    return replace(thread, category=Category.UNKNOWN, site=site, context=context, helper=helper)


def pick_working_thread(threads: Sequence[Thread]) -> Thread | None:
    """The thread that says where the process is stuck: not a helper, the most specific wait.

    Ties go to MainThread, then to the thread with a Python stack. Helper threads count only
    when nothing else exists.
    """
    candidates = [t for t in threads if not t.helper and t.python] or [
        t for t in threads if t.python] or list(threads)
    if not candidates:
        return None

    def score(thread: Thread) -> tuple[int, int, int]:
        category = thread.category or Category.UNKNOWN
        return (_SPECIFICITY.get(category, 0), int(thread.name == "MainThread"),
                len(thread.frames))

    return max(candidates, key=score)


def classify_process(proc: Process) -> Process:
    """Classify every thread of a process and pick its working thread."""
    threads = tuple(classify_thread(t) for t in proc.threads)
    if proc.state in ("Z", "X", "gone"):
        return replace(proc, threads=threads, working_tid=None)
    working = pick_working_thread(threads)
    return replace(proc, threads=threads, working_tid=working.tid if working else None)


def process_category(proc: Process) -> Category:
    """The category of a process: its state when dead or stopped, else its working thread's."""
    if proc.state == "gone" or proc.state == "X":
        return Category.DEAD
    if proc.state == "Z":
        return Category.ZOMBIE
    if proc.state in ("T", "t"):
        return Category.STOPPED
    working = proc.working_thread
    if working is None or working.category is None:
        return Category.UNKNOWN
    return working.category
