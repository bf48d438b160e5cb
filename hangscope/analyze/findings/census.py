"""The few processes each finding is about, sorted out of a snapshot in one pass.

The findings are a dozen checks, and most ask one question of every process (is it a
compiler, is its state notable, when did it start, what does it listen on, how much memory
does it hold). At 131,072 ranks each such pass costs 0.03-0.1 s, as reading a process's
fields misses the cache whatever the pass computes (issue 36); one pass that asks them all
pays that once. The checks read their processes from here, in snapshot order as before.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from hangscope.model import (
    EXITED_STATES,
    GONE_STATES,
    STOPPED_STATES,
    ZOMBIE_STATES,
    Process,
    Role,
    Snapshot,
    Socket,
)

#: Process states a finding is about: zombie or being reaped, vanished, stopped, D.
NOTABLE_STATES = ZOMBIE_STATES | GONE_STATES | STOPPED_STATES | {"D"}
#: An Inductor compile worker this busy over the window is compiling.
BUSY_WORKER_PERCENT = 20.0
_STATE = operator.attrgetter("state")


@dataclass
class Census:
    """What the checks need of a snapshot's processes, each list in snapshot order."""

    notable: list[Process] = field(default_factory=list)  # its state or a thread's is notable
    compilers: list[Process] = field(default_factory=list)  # live, role compiler
    workers: list[Process] = field(default_factory=list)  # busy Inductor compile workers
    first_started: Process | None = None  # the first of the oldest with a create time
    listening: list[tuple[Process, Socket]] = field(default_factory=list)
    # Live processes with an RSS, by host (None: the one host of an unmerged snapshot, or a
    # process without one), for the memory check.
    memory: dict[str | None, list[Process]] = field(default_factory=dict)


def take_census(snap: Snapshot) -> Census:
    """The processes each check asks about, in one pass (shared by the checks of one
    ``find_all``: see ``census_of``)."""
    found = Census()
    notable, compilers, workers = found.notable, found.compilers, found.workers
    memory = found.memory
    many = len(snap.hosts) > 1
    last: object = memory  # no host yet: the first process looks its list up
    on_host: list[Process] = []
    oldest: float | None = None
    for p in snap.processes:
        state = p.state
        # The common case first, in one test: a live, running or sleeping process with no
        # thread in D has nothing to say (asked of each of 131,072 ranks).
        if state in NOTABLE_STATES or "D" in map(_STATE, p.threads):
            notable.append(p)
        role = p.role
        exited = state in EXITED_STATES  # (Process.is_exited)
        if role is Role.COMPILER and not exited:
            compilers.append(p)
        elif role is Role.COMPILE_WORKER and (p.cpu_percent or 0) >= BUSY_WORKER_PERCENT:
            workers.append(p)
        started = p.create_time
        if started and (oldest is None or started < oldest):  # min(): the first of equals
            oldest, found.first_started = started, p
        if p.listening:
            found.listening.extend((p, s) for s in p.listening)
        if not exited and p.rss is not None:
            host = p.host if many else None
            if host != last:  # a host's ranks come together: one lookup per run of them
                on_host = memory.setdefault(host, [])
                last = host
            on_host.append(p)
    return found


def cpu_of(procs: Sequence[Process], busy_percent: float) -> tuple[float | None, list[Process]]:
    """The most CPU any of ``procs`` used and those that used ``busy_percent`` or more, in
    one pass; (None, []) where any one's CPU is unknown (or there are none)."""
    top: float | None = None
    busy = []
    for p in procs:
        cpu = p.cpu_percent
        if cpu is None:
            return None, []
        if top is None or cpu > top:
            top = cpu
        if cpu >= busy_percent:
            busy.append(p)
    return top, busy


# The census of the last snapshot asked about: ``find_all`` runs every check on one snapshot,
# and a check run alone (a test) builds its own. Keyed by the processes tuple, which is held
# here so that its id is not reused; ``release_census`` drops it when the findings are done.
_last: list[tuple[tuple[Process, ...], Census]] = []


def census_of(snap: Snapshot) -> Census:
    """The census of ``snap``'s processes, built once for all the checks that ask."""
    if _last and _last[0][0] is snap.processes:
        return _last[0][1]
    found = take_census(snap)
    _last[:] = [(snap.processes, found)]
    return found


def release_census() -> None:
    """Drop the kept census (and the processes it holds)."""
    _last.clear()
