"""A sampler that replays recorded Snapshots: drives the TUI in tests without a live job.

A test helper, so it lives in tests/ (``from replay import ReplaySampler``); the TUI takes
any ``hangscope.tui.source.SnapshotSource``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from hangscope.model import Snapshot


class ReplaySampler:
    """Returns the given Snapshots in order, then the last one again, forever.

    An exception in the sequence is raised instead of returned (``ProcessNotFound`` plays a
    job that exits). ``delay`` makes every call take that long, like a slow py-spy sweep.
    """

    def __init__(self, snapshots: Sequence[Snapshot | BaseException], delay: float = 0.0,
                 target: int | None = None) -> None:
        if not snapshots:
            raise ValueError("ReplaySampler needs at least one Snapshot")
        self._items = list(snapshots)
        self.delay = delay
        first = next((s for s in self._items if isinstance(s, Snapshot)), None)
        job = first.job if first is not None else None
        self.target = target or ((job.target or job.launcher or 0) if job else 0)
        self.calls = 0
        self.running = threading.Event()  # set while a snapshot() call is in progress
        self._lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        """The next recorded Snapshot, after ``delay`` seconds."""
        self.running.set()
        try:
            if self.delay:
                time.sleep(self.delay)  # stands in for the sampling window of a real Sampler
            with self._lock:
                item = self._items[min(self.calls, len(self._items) - 1)]
                self.calls += 1
            if isinstance(item, BaseException):
                raise item
            return item
        finally:
            self.running.clear()
