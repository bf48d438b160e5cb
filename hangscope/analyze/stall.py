"""When a watched job has stalled: a pure clock over the pulses of ``hangscope watch``.

A pulse is one cheap window of progress evidence (collect/progress.py, nobody paused) and the
per-process decision analyze/evidence/progress.py draws from it. From each decision this module
keeps
one fact per process: the *wait* its working thread sits in (its dominant Python stack), or
nothing when it moved or computed. A job has stalled when one of its working processes has sat
in the same wait for ``after`` seconds, measured from the first pulse that saw it there:

* every rank waiting on each other (a deadlock, a mismatch) stalls at once;
* a straggler that spins while the others wait stalls too: the others' waits do not end;
* a slow step, a checkpoint or a data reload of up to ``after`` seconds does not: the ranks that
  wait for it leave their wait when it ends, and the clock of each starts again;
* a process's clock runs while it stays in a wait; a thread that ran, moved data or left for
  another line (``wait_of`` returns None) starts it again;
* a healthy helper thread or process never hides a stall: a process's clock is its own, and
  the job's is the longest of them (a heartbeat cannot reset a rank's wait).

A computing thread (on CPU for most of the pulse, not proven to spin) is not in a wait: a
compile or a long kernel on CPU is work. A poll (a thread that wakes on a timer, never leaves its
line and moves no data) is a wait: its stack stays the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hangscope.analyze.evidence.progress import IDLE_CPU_SHARE, PROGRESSING, STUCK
from hangscope.model.progress import ProcessProgress, RankProgress, ThreadProgress

#: Where the working thread could not be sampled but its counters say it sleeps.
ASLEEP = ("(asleep: no Python samples)",)

#: Verdict kinds of a full dump that say the job is not hung (``VerdictKind`` values).
NOT_HUNG = frozenset({"progressing", "idle", "slow", "paused"})


def wait_of(proc: ProcessProgress, decision: RankProgress,
            seconds: float) -> tuple[str, ...] | None:
    """The wait ``proc``'s working thread sits in over one pulse, None when it moved or worked.

    The wait is named by its dominant Python stack, so the same wait in the next pulse has the
    same name, and a thread that left its wait and came back elsewhere has another.
    """
    if proc.gone or decision.decision == PROGRESSING:
        return None
    thread = _thread(proc, decision.tid)
    if thread is None:
        return None
    counters = thread.counters
    cpu_s = (counters.cpu_ns or 0) / 1e9 if counters is not None else 0.0
    busy = counters is not None and cpu_s >= IDLE_CPU_SHARE * seconds
    if busy and decision.decision != STUCK:
        return None  # on CPU and not proven a spin: work (a compile, a long step)
    if thread.stacks:
        return thread.stacks[0].frames
    return ASLEEP if counters is not None and not busy else None


def _thread(proc: ProcessProgress, tid: int | None) -> ThreadProgress | None:
    by_tid = {t.tid: t for t in proc.threads}
    return by_tid.get(tid if tid is not None else proc.pid) or next(
        (t for t in proc.threads if t.samples), None)


@dataclass(frozen=True)
class Waiting:
    """One process in one wait: which, and since when (the start of the first pulse in it)."""

    pid: int
    wait: tuple[str, ...]
    since: float


@dataclass
class StallClock:
    """The waits of the watched processes over the pulses so far.

    ``feed`` one pulse at a time (its start and end times, and the wait of every process it
    watched); ``stalled_for`` is then how long the longest wait has lasted.
    """

    after: float
    waiting: dict[int, Waiting] = field(default_factory=dict)
    last_end: float | None = None

    def feed(self, start: float, end: float,
             waits: Mapping[int, tuple[str, ...] | None]) -> None:
        kept: dict[int, Waiting] = {}
        for pid, wait in waits.items():
            if wait is None:
                continue  # it moved or worked: its clock starts again
            before = self.waiting.get(pid)
            if before is None or _other_wait(before.wait, wait):
                kept[pid] = Waiting(pid, wait, start)
            else:  # the same wait, now perhaps named by its stack: the clock goes on
                kept[pid] = Waiting(pid, wait if wait != ASLEEP else before.wait, before.since)
        self.waiting = kept
        self.last_end = end

    def stalled_for(self) -> float:
        """Seconds the longest current wait has lasted (0 when nobody waits)."""
        if self.last_end is None or not self.waiting:
            return 0.0
        return max(self.last_end - w.since for w in self.waiting.values())

    def age(self, pid: int) -> float:
        """How long ``pid`` has been in its current wait (0: not waiting)."""
        found = self.waiting.get(pid)
        return 0.0 if found is None or self.last_end is None else self.last_end - found.since

    def stalled(self) -> bool:
        return self.stalled_for() >= self.after

    def longest(self) -> Waiting | None:
        return min(self.waiting.values(), key=lambda w: w.since, default=None)

    def shape(self) -> frozenset[tuple[int, tuple[str, ...]]]:
        """Who waits where, for the waits as old as ``after``: a hang that changes shape (a
        rank leaves for another wait, a watchdog starts its abort) has another."""
        if self.last_end is None:
            return frozenset()
        return frozenset((w.pid, w.wait) for w in self.waiting.values()
                         if self.last_end - w.since >= self.after)

    def moved_since(self, shape: Iterable[tuple[int, tuple[str, ...]]]) -> bool:
        """Every process of a stalled ``shape`` has left that wait: the job moves again."""
        return all(self.waiting.get(pid) is None or self.waiting[pid].wait != wait
                   for pid, wait in shape)


def _other_wait(before: tuple[str, ...], now: tuple[str, ...]) -> bool:
    """Two waits are different only when both are named by their stacks and the stacks
    differ: a pulse without Python samples (the cheap kind) sees that a thread sleeps, not
    where, so it neither ends nor renames the wait."""
    return before != now and ASLEEP not in (before, now)


def leaf(wait: tuple[str, ...]) -> str:
    """The innermost frame of a wait, for one line on the terminal."""
    return wait[-1] if wait else "?"
