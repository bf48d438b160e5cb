"""Where a wait chain ends in a calm process it waits on for work: no sink
(analyze/patterns/calm/calm.py
reads the calm processes; analyze/patterns/waitpatterns.py asks here chain by chain)."""

from __future__ import annotations

from hangscope.analyze.evidence.progress import MIN_WAKES
from hangscope.analyze.evidence.working import (
    progressing_pids,
    raw_window,
    started_at_work,
    window_thread,
)
from hangscope.analyze.graph.objectedges import sleeping_method
from hangscope.analyze.graph.waitwalk import Graph
from hangscope.analyze.patterns.calm.calm import calm_kind
from hangscope.analyze.patterns.calm.calm_chain import polls_for_work, waits_for_work
from hangscope.analyze.patterns.calm.longpoll import holds_requests_with_deadline
from hangscope.model import Category, Process, Snapshot
from hangscope.model.progress import RankProgress


def calm_end(g: Graph, path: list[int]) -> bool:
    """The chain ends in a calm process it waits on for work: no sink. Judged chain by chain:
    a worker's idle task pipe must not hide a client's lost request beside it."""
    end = g.procs.get(g.edges[path[-1]].to_pid or 0)
    if end is None:
        return False
    if end.pid != g.edges[path[0]].pid and _sleeps_and_wakes(g.snap, end) and all(
            waits_for_work(g.snap, g.edges[i]) for i in path) and not _writes_elsewhere(
                g.snap, end, g.edges[path[-1]].pid):
        # a producer that sleeps and wakes again (a loader's fetch between two batches): its
        # readers wait for what it makes, which is slow, not a hang
        return True
    if sleeping_method(end, g.snap.waits.kernel if g.snap.waits is not None else None):
        # an async method in flight that sleeps until a timer (a controller between its polls
        # of the workers): what waits on it waits for its next turn
        return True
    calm = _calm(g.snap, end)
    if calm == "idle" and started_at_work(g.snap, end, progressing_pids(g.snap)) is not None:
        # a server idle while processes it started progress (a raylet waiting for the
        # workers it started to connect): what waits on it waits for their start-up
        return True
    if calm == "paused" and not (
            end.listening and g.edges[path[-1]].kind in ("unix", "tcp", "store")):
        # everything waits on one long sleep between phases: paused, not hung (a client
        # waiting for a reply from a server, one that listens, asleep in its handler is a
        # lost request: kept)
        return True
    # workers reading their task pipe from a server that waits for requests: an idle
    # service (a client waiting for a reply from an idle server is a lost request: kept)
    if calm == "idle" and holds_requests_with_deadline(g.snap, end) and all(
            g.edges[i].kind in ("unix", "tcp", "py_lock", "child") for i in path):
        return True  # a long poll's client: its request is answered by the deadline
    # (a main loop's probable feeder thread, analyze/graph/handoffedges.py: it waits as it does;
    # a client polling the idle server at the end, ``BRPOP queue 1``: asking for work)
    last = path[-1]
    return calm == "idle" and all(waits_for_work(g.snap, g.edges[i]) or (
        g.edges[i].kind == "thread" and g.edges[i].probable) or (
        i == last and end.listening and polls_for_work(g.snap, g.edges[i])) for i in path)


def _sleeps_and_wakes(snap: Snapshot, proc: Process) -> bool:
    """The window saw ``proc``'s working thread asleep in ``time.sleep`` and waking from it:
    it is alive, not stuck (a sleep that never woke is ``paused``, judged by ``_calm``). Woken
    again and again at one line, the window calls it a poll; a producer that sleeps per item
    (a loader's fetch) looks the same until its batch is written: slow, not a hang either."""
    measured = _measured(snap, proc.pid)
    thread = proc.working_thread
    if measured is None or thread is None or measured.tid not in (None, thread.tid):
        return False
    return measured.decision in ("slow", "stuck") and measured.evidence == "counters" \
        and thread.category is Category.SLEEP and (measured.wakes or 0) > 0


def _writes_elsewhere(snap: Snapshot, end: Process, reader: int) -> bool:
    """``end`` woke and wrote again and again in the window while ``reader``, blocked reading
    the pipe only ``end`` can write, never woke: a write to that pipe would have woken it, so
    ``end`` writes somewhere else (a heartbeat's timestamps, a monitor's log) and makes
    nothing its reader waits for. A producer that sleeps per item writes nothing until its
    item is made."""
    ends, readers = _measured(snap, end.pid), _measured(snap, reader)
    if ends is None or readers is None or readers.wakes != 0 or not ends.wakes:
        return False
    raw = raw_window(snap, end)
    thread = window_thread(raw, ends) if raw is not None else None
    return thread is not None and thread.io is not None and thread.io.syscw >= MIN_WAKES


def _calm(snap: Snapshot, proc: Process) -> str | None:
    """``paused`` (one long sleep, woken 0 times in the window: what waits on it waits for a
    phase to end) or ``idle`` (a server waiting for requests), as analyze/patterns/calm/calm.py
    reads it."""
    return calm_kind(proc, _measured(snap, proc.pid),
                     snap.waits.kernel if snap.waits is not None else None, snap)


def _measured(snap: Snapshot, pid: int) -> RankProgress | None:
    """The progress window's decision for ``pid`` (None: not watched)."""
    return next((r for r in (snap.progress.ranks if snap.progress else ()) if r.pid == pid),
                None)
