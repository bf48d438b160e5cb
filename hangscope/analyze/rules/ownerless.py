"""The verdict rule for a lock that every waiter wants and no running thread holds.

Threads of one process all wait to take one lock (one source text: ``MODEL_LOCK``,
``self.lock``) and no thread's stack is inside a block that holds it, while the process's other
threads only sleep, join or wait to be notified. Nothing that runs will release it: its holder
is a frame that is not running (a generator or coroutine suspended inside ``with lock:``, an
``acquire()`` whose ``release()`` an early return skipped) or a thread that has ended. Not a
lock-order inversion: that needs two locks, each held by a waiter of the other. The waiter's
own source names the places that can park the lock (``Frame.parked``, collect/parkedlocks.py).
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.working import notified_wait
from hangscope.analyze.graph.sites import called_from
from hangscope.analyze.graph.threadedges import joins, user_frame, waits_on_lock
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.model import Category, Frame, Process, Severity, Thread, Verdict, VerdictKind
from hangscope.words import who

#: What the process's other threads may be doing while nobody holds the lock.
_BYSTANDING = frozenset({Category.SLEEP, Category.IDLE})


def _taken(thread: Thread) -> Frame | None:
    frame = user_frame(thread)
    return frame if frame is not None and frame.takes else None


def _bystander(thread: Thread) -> bool:
    return (thread.helper or not thread.python or thread.category in _BYSTANDING
            or joins(thread) or notified_wait(thread) is not None)


def _ownerless(facts: Facts, proc: Process) -> tuple[list[Thread], str, Frame] | None:
    waiters = [t for t in proc.threads if waits_on_lock(t)]
    frames = [_taken(t) for t in waiters]
    if not waiters or None in frames or proc.key not in facts.stuck or not all(
            t.stuck or facts.samples <= 1 for t in waiters):
        return None
    texts = {f.takes for f in frames if f is not None}
    if len(texts) != 1:
        return None
    lock = texts.pop() or ""
    graph = facts.snapshot.wait_graph
    tids = {t.tid for t in waiters}
    if graph is not None and any(e.pid == proc.pid and e.tid in tids and e.kind == "py_lock"
                                 for e in graph.edges):
        return None  # a holder is named: the lock-holder rules say who
    others = [t for t in proc.threads if t.tid not in tids]
    if any(lock in f.holds for t in others for f in t.frames if not f.native) or not all(
            _bystander(t) for t in others):
        return None  # a thread holds it, or one that could is busy elsewhere
    return waiters, lock, next(f for f in frames if f is not None)


def ownerless_lock(facts: Facts) -> Verdict | None:
    """Every waiter wants one lock that no running thread holds."""
    for proc in facts.subjects:
        found = _ownerless(facts, proc)
        if found is None:
            continue
        waiters, lock, frame = found
        parked = tuple(dict.fromkeys(p for t in waiters for f in t.frames for p in f.parked))
        site = f"{frame.name} ({frame.short_file}:{frame.line})" + called_from(waiters[0], frame)
        count = f"{len(waiters)} thread{'s wait' if len(waiters) > 1 else ' waits'}"
        summary = (f"A lock nobody running holds: {count} in {who(proc)} to take {lock} at "
                   f"{site}, and no thread's stack is inside a block that holds it (its other "
                   "threads sleep, join or wait to be notified). Its holder is a frame that is "
                   "not running: a generator or coroutine suspended at a yield or await inside "
                   f"`with {lock}:` (a stream whose consumer went away, never closed), or an "
                   "acquire() whose release() was skipped (an early return, an exception), or "
                   "a thread that ended holding it. Not a lock-order inversion: one lock.")
        if parked:
            summary += " In its source: " + "; ".join(parked[:3]) + "."
        said = [line.strip() for line in (*proc.log_errors, *proc.log_tail)
                if any(w in line.lower() for w in ("disconnect", "cancel", "timed out",
                                                   "timeout", "abort", "error"))]
        if said:
            summary += f" Its output says: {said[-1][:160]!r}."
        lines = tuple(f"thread {t.name or t.tid} (tid {t.tid}): waits to take {lock} at "
                      f"{t.site}, wchan {t.wchan or '?'}" for t in waiters[:8])
        return Verdict(VerdictKind.LOCK_WAIT, Severity.CRITICAL, summary, (proc.pid,),
                       (*lines, *evidence(facts)), (proc.host,))
    return None
