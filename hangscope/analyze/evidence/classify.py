"""Classify each thread (category, op, call site, context) and pick each process's working thread.

Pure functions over model data: no I/O, no clock.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from typing import Any

from hangscope.analyze.evidence.progress_hints import yields
from hangscope.analyze.evidence.signatures import (
    CONTEXTS,
    FORK_BOUNDARY,
    HELPER_THREAD_FRAMES,
    HELPER_THREAD_NAMES,
    PLUMBING_FILES,
    SIGNATURES,
    Signature,
    frame_text,
    match_frame,
    op_from_name,
    pool_loop,
)
from hangscope.frameworks import collective_at, polled_why, runs_program
from hangscope.model import EXITED_STATES, Category, Frame, Process, Thread, category_of
from hangscope.model.categories import CATEGORIES
from hangscope.model.evolve import copier, evolve

# Kernel wait channels, for threads py-spy cannot see or whose Python stack ends in a builtin.
_WCHAN_RULES: tuple[tuple[re.Pattern[str], Category], ...] = (
    # Blocked in flock(2) / fcntl(F_SETLKW): a file lock (the holder is in /proc/locks).
    (re.compile(r"locks_lock_inode_wait|flock_lock_inode_wait|posix_lock_inode_wait|"
                r"locks_lock_file_wait|fcntl_setlk|__do_sys_flock"), Category.LOCK),
    (re.compile(r"futex"), Category.LOCK),
    (re.compile(r"nanosleep|hrtimer|msleep"), Category.SLEEP),
    (re.compile(r"epoll|poll_schedule|do_select|do_sys_poll|pipe_read|pipe_write|unix_stream|"
                r"sk_wait|inet_csk_accept|tcp_recv|wait_woken|do_wait|kernel_wait|"
                r"wait_for_partner|fifo_open|pipe_wait"),
     Category.IPC_WAIT),
    (re.compile(r"folio|page|nfs|rpc_wait|blk|io_schedule|jbd2|xfs|ext4"), Category.IO),
)

#: What a wait channel means, where a sentence says more than its name.
_WCHAN_HINTS = {
    "wait_for_partner": "Opening a FIFO (named pipe) that no process has opened from the other "
                        "end (kernel wait channel wait_for_partner).",
    "fifo_open": "Opening a FIFO (named pipe) that no process has opened from the other end.",
}

FILE_LOCK = next(sig for sig in SIGNATURES if sig.id == "jit_lock")

_STATE_CATEGORY = {"T": Category.STOPPED, "t": Category.STOPPED, "Z": Category.ZOMBIE,
                   "X": Category.DEAD}

# How much a category says about where a process is stuck: picks the working thread.
_SPECIFICITY = {category: row.specificity for category, row in CATEGORIES.items()}


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
    fork = next((i for i, f in enumerate(python) if _fork_boundary(f)), None)
    if fork is not None:  # a forked child: its own frames only, never the parent's
        own = python[:fork]
        python = own or python
    for frame in python:
        if frame.file and PLUMBING_FILES.search(frame.file):
            continue
        return f"{frame.name} ({frame.location})"
    if fork is not None and python:  # no user frame of its own: the child's entry point
        entry = [f for f in python if not (f.file or "").endswith("multiprocessing/process.py")]
        frame = (entry or python)[-1]
        return f"{frame.name} ({frame.location})"
    if python:
        return f"{python[0].name} ({python[0].location})"
    return None


def _fork_boundary(frame: Frame) -> bool:
    return bool(FORK_BOUNDARY.search(f"{frame.name} ({frame.file})"))


# The public calls only: init_process_group creates its group through the same helper.
_NEW_GROUP = ("new_group", "new_subgroups", "new_subgroups_by_enumeration", "split_group")


def _op(sig: Signature, matched: Frame, frames: Sequence[Frame]) -> str | None:
    if sig.op:
        return sig.op
    if sig.category is Category.COMM_INIT:
        # new_group is a collective of the default group: every rank must call it, in order
        # (its store barrier or gloo's full-mesh connect waits for the ones that did not).
        return "new_group" if any(
            not f.native and f.file and "distributed_c10d" in f.file
            and f.name.rsplit(".", 1)[-1] in _NEW_GROUP for f in frames) else None
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
    if best is None:  # a framework's own frame names it (ZeRO-3's handle, Ray Train's report)
        best = next((op for frame in frames if not frame.native
                     and (op := collective_at(frame.name, frame.file))), None)
    if best is None:
        # An async op's ``work.wait()`` is called from user code: no c10d Python frame names
        # it, but the native Work object does (gloo's SendWork/RecvWork, its UnboundBuffer).
        # The outermost such frame: a group's own method called from Python (Lightning's
        # ``group.monitored_barrier()``) waits in the sends it is made of.
        best = next((op for frame in reversed(frames) if frame.native
                     and (op := op_from_name(frame.name))), None)
    return best


def _context(frames: Sequence[Frame]) -> str | None:
    # A frame inside ``with torch.cuda.graph(...)`` (its source says so): all it calls runs
    # under capture, though no torch frame is on the stack.
    if any(frame.capture for frame in frames if not frame.native):
        return "cuda_graph_capture"
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
    for depth, frame in enumerate(thread.frames):
        pool = pool_loop(frame)
        if not pool and (frame.native or not frame.file
                         or not HELPER_THREAD_FRAMES.search(f"({frame.file})")):
            continue
        # A pool's worker thread (a framework's, AnyIO's, too) is plumbing while it waits for
        # a task; once it runs one, the task's code is the program's own work (a pool worker
        # deadlocked on the user's locks is the culprit, not an always-there helper).
        return not (pool and any(user_code(f) for f in thread.frames[:depth]))
    return False


def user_code(frame: Frame) -> bool:
    """A Python frame of the program's own code: outside the plumbing libraries."""
    return not frame.native and bool(frame.file) and not PLUMBING_FILES.search(frame.file)


def _classification(thread: Thread,
                    signatures: Sequence[Signature] = SIGNATURES) -> dict[str, Any]:
    """The fields ``classify_thread`` sets; reads only frames, state, wchan, active and name.

    Those five are the memo key in ``classify_thread``: a new input here must join the key.
    """
    helper = is_helper(thread)
    if thread.state in _STATE_CATEGORY:
        return dict(category=_STATE_CATEGORY[thread.state], helper=helper,
                    hint="The thread is stopped (SIGSTOP or a debugger)."
                    if thread.state in "Tt" else None)
    frames = thread.frames
    context = _context(frames)
    for sig in signatures:
        matched = match_frame(sig, frames)
        if matched is None:
            continue
        category = sig.category
        hint = sig.hint
        if sig.id == "framework_poll":  # what it waits for, in the framework's words
            hint = polled_why(matched.name, matched.file) or hint
        if category is Category.JIT_COMPILE and match_frame(FILE_LOCK, frames) is not None:
            hint = ("Compiling, and waiting for the JIT cache's file lock: another process "
                    "builds the same kernel (/proc/locks names it).")
        # A thread that is still inside the Python code of a wait primitive but runs on CPU
        # is a spin-wait (libcuda, vLLM shm, sched_yield): a wait, so keep the category.
        return dict(category=category, op=_op(sig, matched, frames),
                    site=call_site(frames, matched), context=context, hint=hint, helper=helper)
    site = call_site(frames)
    if thread.wchan:
        for pattern, category in _WCHAN_RULES:
            if pattern.search(thread.wchan):
                return dict(category=category, site=site, context=context, helper=helper,
                            hint=_WCHAN_HINTS.get(thread.wchan,
                                                  f"Kernel wait channel {thread.wchan}."))
    if thread.state == "D":
        return dict(category=Category.IO, site=site, context=context, helper=helper,
                    hint="Uninterruptible sleep (state D): waiting on storage or a driver.")
    if (thread.active or thread.state == "R") and frames:
        if yields(frames):
            return dict(category=Category.SPIN, site=site, context=context, helper=helper,
                        hint="Spin-waiting: it yields the CPU (sched_yield) in a loop until "
                             "another thread or process changes what it checks.")
        return dict(category=Category.RUNNING, site=site, context=context, helper=helper,
                    hint="Running on CPU in this code.")
    if not frames and thread.state == "S":
        return dict(category=Category.IDLE, site=site, helper=helper)
    return dict(category=Category.UNKNOWN, site=site, context=context, helper=helper)


# -- memo: a job of many ranks has few distinct stacks ------------------------------------
# A merged job of 131,072 ranks would otherwise run every signature over ~40 frames of every
# rank. Stacks are interned (equal frames -> one canonical tuple, which the analysis then keys
# on by identity; loops too: two `python -c` programs share "<string>") and each (stack, state,
# wchan, active, name) is classified once. Entries hold their canonical tuple: no id() reused.
_FRAME_FIELDS = operator.attrgetter("name", "file", "line", "native", "module", "capture", "loops")
_MEMO_LIMIT = 4096  # distinct stacks kept; a real job has tens
_stacks: dict[tuple[Any, ...], tuple[Frame, ...]] = {}
_canonical: dict[int, tuple[Frame, ...]] = {}
_memo: dict[tuple[Any, ...], _Classified] = {}


# The stack asked about last, as (that tuple, its key, its interned tuple): the ranks of a job
# mostly repeat their neighbour's stack. A decoder that gives equal stacks one tuple
# (model/sharedstacks.py: a merge) hands over the neighbour's very tuple, found here by
# identity without a field read, even where an earlier equal stack is the interned one; a
# fresh one's key is compared with the last key, which reads its strings (memcmp) where a dict
# lookup hashes each of them first (~100 fresh strings a rank).
_last: tuple[tuple[Frame, ...], tuple[Any, ...], tuple[Frame, ...]] | None = None


def canonical_frames(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The one stored tuple equal to ``frames`` (``frames`` itself the first time)."""
    global _last
    if _canonical.get(id(frames)) is frames:
        return frames
    last = _last
    if last is not None and last[0] is frames:
        return last[2]
    key = tuple(map(_FRAME_FIELDS, frames))
    if last is not None and last[1] == key:
        found = last[2]  # what _stacks[key] holds: _last is set after every clear
    else:
        found = _stacks.get(key)
        if found is None:
            if len(_stacks) >= _MEMO_LIMIT:
                _stacks.clear()
                _canonical.clear()
                _memo.clear()
            _stacks[key] = found = frames
            _canonical[id(frames)] = frames
    _last = (frames, key, found)
    return found


class _Classified:
    """One memo entry: the interned stack, the fields classification sets, and the thread's
    score as a working-thread candidate (``pick_working_thread``)."""

    __slots__ = ("changes", "frames", "get", "gil", "interned", "score", "score_native",
                 "values")

    def __init__(self, thread: Thread, frames: tuple[Frame, ...],
                 changes: dict[str, Any]) -> None:
        self.frames = frames  # holds the interned tuple, whose id() is in the key
        self.changes = changes
        self.interned = {**changes, "frames": frames}  # for an equal stack's other copies
        self.get = operator.attrgetter(*changes)
        self.values = tuple(changes.values())
        if len(changes) == 1:
            self.values = self.values[0]
        category = changes.get("category") or Category.UNKNOWN
        self.gil = category is Category.GIL_WAIT  # (classify_process: is the GIL free?)
        rest = (_SPECIFICITY.get(category, 0), int(thread.name == "MainThread"), len(frames))
        # The candidate tier first: a framework's thread that runs the program's code (Ray
        # Train's training thread), a Python thread not a helper, a Python helper, the rest.
        self.score = (1 if changes.get("helper") else
                      3 if frames and runs_program(thread.name) else 2, *rest)
        self.score_native = (0, *rest)


_copy_thread = copier(Thread)
_NOT_GIL = tuple(sig for sig in SIGNATURES if sig.category is not Category.GIL_WAIT)


def _gil_free(thread: Thread) -> Thread:
    """A thread in ``take_gil`` while no other thread of its process has a Python thread
    state: nothing can hold the GIL against it, so it is not waiting but taking it back on
    its way out of a native call (Py_END_ALLOW_THREADS), caught there by the one native
    sample (CI: a rank in torch.linalg.eigh read "waits for the GIL" while it ran 1.6 s of
    CPU in 2 s). Read as the frames below say, as a running thread."""
    changes = _classification(_copy_thread(thread, {"state": "R", "active": True,
                                                    "wchan": None}), _NOT_GIL)
    if changes.get("category") is Category.RUNNING:
        changes["hint"] = ("Running on CPU in this code: it takes back the GIL after a native "
                           "call, and no other Python thread exists to hold it.")
    return _copy_thread(thread, changes)


def _classified(thread: Thread) -> tuple[Thread, _Classified]:
    """The classified thread, and its memo entry."""
    frames = thread.frames
    if frames:
        frames = canonical_frames(frames)
    key = (id(frames), thread.state, thread.wchan, thread.active, thread.name)
    hit = _memo.get(key)
    if hit is None:
        if len(_memo) >= 8 * _MEMO_LIMIT:  # thread names churn in a long live session
            _memo.clear()
        hit = _memo[key] = _Classified(thread, frames, _classification(thread))
    if frames is thread.frames:
        # (Every classification sets a category: a raw thread, with none, needs no compare.)
        if thread.category is not None and hit.get(thread) == hit.values:
            return thread, hit  # already classified so (a merged job's per-node dumps)
        return _copy_thread(thread, hit.changes), hit
    # An equal stack, swapped for the interned one that the call tree keys on.
    return _copy_thread(thread, hit.interned), hit


def classify_thread(thread: Thread) -> Thread:
    """Give a thread its category, op, call site, context and hint."""
    return _classified(thread)[0]


def pick_working_thread(threads: Sequence[Thread]) -> Thread | None:
    """Where the process is stuck: a framework's thread running the program's code (named in
    ``work_threads``, with a stack), else not a helper, the most specific wait. Ties go to
    MainThread, then to the thread with a Python stack; helpers only when nothing else exists."""
    candidates = [t for t in threads if not t.helper and t.python] or [
        t for t in threads if t.python] or list(threads)
    if len(candidates) < 2:
        return candidates[0] if candidates else None

    def score(thread: Thread) -> tuple[int, int, int, int]:
        category = thread.category or Category.UNKNOWN
        return (int(bool(thread.frames) and runs_program(thread.name)),
                _SPECIFICITY.get(category, 0),
                int(thread.name == "MainThread"), len(thread.frames))

    return max(candidates, key=score)


def classify_process(proc: Process) -> Process:
    """Classify every thread of a process and pick its working thread."""
    # One pass: each thread's memo entry also carries its score as a working-thread
    # candidate, so the pick (``pick_working_thread``, first best score wins) costs a
    # comparison per thread, for each of 131,072 ranks.
    threads = []
    same = True
    working_tid = None
    best: tuple[int, int, int, int] | None = None
    for thread in proc.threads:
        done, hit = _classified(thread)
        if hit.gil and not any(
                t.python for t in proc.threads if t.tid != thread.tid):
            done = _gil_free(done)
        threads.append(done)
        same = same and done is thread
        score = hit.score if thread.python else hit.score_native
        if best is None or score > best:
            best, working_tid = score, thread.tid
    if best is not None and best[0] == 0 and any(t.tid == proc.pid for t in proc.threads):
        working_tid = proc.pid  # no Python (a redis-server): its main thread runs its loop
    if proc.state in EXITED_STATES:  # (Process.is_exited, not cached on the raw process)
        working_tid = None
    # The working thread is known here: where it is the first thread (a rank's MainThread),
    # it is stored as ``Process.working_thread`` would find it, saving a scan per rank.
    first = threads[0] if threads and threads[0].tid == working_tid else None
    if same:
        if working_tid == proc.working_tid:
            if first is not None:
                proc.__dict__.setdefault("working_thread", first)
            return proc  # every thread came classified as it is (a merged dump)
        done = evolve(proc, {"working_tid": working_tid})
    else:
        done = evolve(proc, {"threads": tuple(threads), "working_tid": working_tid})
    if first is not None:
        done.__dict__["working_thread"] = first
    return done


_FIND = object()  # process_category: look the working thread up


def process_category(proc: Process, working: Thread | object | None = _FIND) -> Category:
    """The category of a process: its state when dead or stopped, else its working thread's.

    ``working``: the process's working thread when the caller already has it (the scan for
    it then runs once per process, not once per question, over 131,072 ranks).
    """
    if working is _FIND:
        return proc.category
    return category_of(proc, working if isinstance(working, Thread) else None)
