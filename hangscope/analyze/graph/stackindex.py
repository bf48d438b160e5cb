"""The processes of one snapshot by the stacks of their threads: a pattern asks which
processes have a thread whose stack has a fact once per distinct set of stacks, not per rank.

``classify`` interns every stack (equal frames -> one tuple), so the 131,072 ranks of a merged
job fall into a handful of sets of stacks (issue 36): a fact of a stack is asked of those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hangscope.model import Frame, Process

Frames = tuple[Frame, ...]


class StackIndex:
    """Processes grouped by the stacks of their threads, in snapshot order within each."""

    def __init__(self, processes: Sequence[Process]) -> None:
        self.processes = processes
        self._groups: dict[tuple[int, ...], tuple[tuple[Frames, ...], list[Process]]] | None = None
        self._having: dict[Callable[[Frames], object], list[Process]] = {}

    def groups(self) -> list[tuple[tuple[Frames, ...], list[Process]]]:
        """(the stacks of its threads, the processes that have them), built once."""
        if self._groups is None:
            self._groups = {}
            for p in self.processes:
                # Each entry holds its stacks, so the ids in its key cannot be reused.
                key = tuple(id(t.frames) for t in p.threads)
                entry = self._groups.get(key)
                if entry is None:
                    entry = self._groups[key] = (tuple(t.frames for t in p.threads), [])
                entry[1].append(p)
        return list(self._groups.values())

    def stacks(self) -> list[Frames]:
        """Every distinct stack of the snapshot, once."""
        return list({id(s): s for stacks, _ in self.groups() for s in stacks}.values())

    def having(self, fact: Callable[[Frames], object]) -> list[Process]:
        """The processes with a thread whose stack has ``fact`` (a truthy answer), in
        snapshot order."""
        found = self._having.get(fact)
        if found is None:
            groups = [procs for stacks, procs in self.groups()
                      if any(fact(frames) for frames in stacks)]
            if len(groups) > 1:  # several sets of stacks: the snapshot's order, in one pass
                found = [p for p in self.processes if any(fact(t.frames) for t in p.threads)]
            else:
                found = groups[0] if groups else []
            self._having[fact] = found
        return found
