"""Whether a process or the job still works: the CPU it used and the progress window's decision.

Read by the wait patterns before they call a wait one nobody can end (a process that computes
may still end it), over the graph of analyze/graph/waitwalk.py.
"""

from __future__ import annotations

from typing import Protocol

from hangscope.model import Category, Process, Snapshot


class Graph(Protocol):
    """What liveness reads of analyze/graph/waitwalk.py's graph (a protocol, so that the
    walk may import this module without a circle)."""

    snap: Snapshot
    procs: dict[int, Process]

#: A process using this much CPU over the window computes: a wait it can end may still end.
BUSY_PERCENT = 50.0
#: ...and one using this much is not idle: what the job waits for may still be on its way.
COMPUTING_PERCENT = 5.0


def job_computes(snap: Snapshot) -> bool:
    """A live process of the job used some CPU over the window: a wait for its work (a
    future, a thread's batches) may still end, so a wait nobody can end is not proven."""
    return any((p.cpu_percent or 0.0) >= COMPUTING_PERCENT
               for p in snap.processes if not p.is_exited)


def stuck_poller(g: Graph, proc: Process) -> bool:
    """Its working thread sleeps at one line and never leaves it: the progress window's
    decision where it was watched, else the stack samples."""
    thread = proc.working_thread
    if proc.is_exited or thread is None or thread.category is not Category.SLEEP:
        return False
    ranks = g.snap.progress.ranks if g.snap.progress is not None else ()
    measured = next((r for r in ranks if r.pid == proc.pid), None)
    if measured is not None:
        return measured.decision == "stuck"
    return thread.samples > 1 and thread.unchanged_samples == thread.samples


def busy(g: Graph, pid: int | None) -> bool:
    """``pid`` works: the progress window saw its lines move, or it used most of a CPU."""
    proc = g.procs.get(pid) if pid is not None else None
    if proc is None or proc.is_exited:
        return False
    measured = next((r for r in (g.snap.progress.ranks if g.snap.progress else ())
                     if r.pid == pid), None)
    return (measured is not None and measured.decision == "progressing") or (
        proc.cpu_percent or 0.0) >= BUSY_PERCENT
