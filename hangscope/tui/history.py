"""What the live view remembers between Snapshots: how long stacks stayed put, who exited.

One Snapshot only knows its own sampling window; the TUI watches a job for minutes, so it keeps,
per (host, PID, working thread), when that thread's Python stack was first seen unchanged, and
the last view of every rank so a rank that exits while attached stays on screen as exited.
"""

from __future__ import annotations

from dataclasses import replace

from hangscope.model import Process, ProcessKey, Role, Snapshot, StackKey
from hangscope.render.text import measured_moving, stuck_seconds

#: Roles that stay on screen, marked exited, after their process is gone.
_REMEMBERED = (Role.RANK, Role.ENGINE_CORE, Role.LAUNCHER)
EXITED_NOTE = "exited while hangscope was attached"


class History:
    """Folds successive Snapshots of one job into what the live view shows."""

    def __init__(self) -> None:
        # Keyed by (host, PID): over several nodes PIDs repeat.
        self._since: dict[tuple[ProcessKey, int], tuple[StackKey, float]] = {}
        self._last_seen: dict[ProcessKey, Process] = {}
        #: (host, PID) -> seconds the working stack has been unchanged; None: it moved in the
        #: last window.
        self.stuck_for: dict[ProcessKey, float | None] = {}

    def update(self, snap: Snapshot, now: float) -> Snapshot:
        """Record ``snap`` taken at ``now``; return it with ranks that exited since added back."""
        since: dict[tuple[ProcessKey, int], tuple[StackKey, float]] = {}
        stuck_for: dict[ProcessKey, float | None] = {}
        measured = measured_moving(snap)  # lines seen moving at 100 Hz: a spin on one line
        for proc in snap.processes:
            working = proc.working_thread
            if working is None or proc.is_exited:
                continue
            key = working.stack_key
            slot = (proc.key, working.tid)
            previous = self._since.get(slot)
            moved = (working.samples > 1 and not working.stuck) or proc.pid in measured
            # Unchanged over this snapshot's own window: stuck at least that long, or as long
            # as the kernel says the thread has been off CPU, if longer.
            bound = (now - stuck_seconds(working, snap.window_s) if working.stuck and not moved
                     else now)
            if previous is not None and previous[0] == key and not moved:
                first_seen = min(previous[1], bound)
            else:
                first_seen = bound
            since[slot] = (key, first_seen)
            stuck_for[proc.key] = None if moved else max(0.0, now - first_seen)
        self._since = since
        self.stuck_for = stuck_for

        # A rank that died but is not reaped yet has lost its command line, so discovery
        # calls it "other": show it under the name it had.
        processes = tuple(
            replace(self._last_seen[p.key], state=p.state, cpu_percent=None,
                    errors=p.errors or (EXITED_NOTE,))
            if p.is_exited and p.role is Role.OTHER and p.key in self._last_seen else p
            for p in snap.processes)
        if processes != snap.processes:
            snap = replace(snap, processes=processes)
        present = {p.key for p in snap.processes}
        departed = tuple(
            # Keeps its threads: the last stacks seen are what the user wants to read now.
            replace(proc, state="gone", cpu_percent=None, errors=(EXITED_NOTE,))
            for key, proc in self._last_seen.items() if key not in present
        )
        for proc in snap.processes:
            if proc.role in _REMEMBERED:
                self._last_seen[proc.key] = proc if not proc.is_exited else self._last_seen.get(
                    proc.key, proc)
        for proc in departed:
            self._last_seen[proc.key] = proc
        if not departed:
            return snap
        return replace(snap, processes=snap.processes + departed)
