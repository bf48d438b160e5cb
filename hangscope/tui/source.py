"""What the TUI samples from: a Sampler, the multi-node sampler, or a test's replay of
recorded Snapshots (tests/replay.py)."""

from __future__ import annotations

from typing import Protocol

from hangscope.model import Snapshot


class SnapshotSource(Protocol):
    """What the TUI needs from a sampler (``hangscope.live.sampler.Sampler`` is one)."""

    target: int

    def snapshot(self) -> Snapshot:
        """One complete Snapshot of the job.

        Raises:
            HangscopeError: e.g. ProcessNotFound once the whole job has exited.
        """
        ...
