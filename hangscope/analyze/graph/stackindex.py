"""The processes of one snapshot by the stacks of their threads: a pattern asks which
processes have a thread whose stack has a fact once per distinct set of stacks, not per rank.

``classify`` interns every stack (equal frames -> one tuple), so the 131,072 ranks of a merged
job fall into a handful of sets of stacks (issue 36): a fact of a stack is asked of those.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from functools import cached_property

from hangscope.model import Frame, Process

Frames = tuple[Frame, ...]
_FRAMES = operator.attrgetter("frames")


class StackIndex:
    """Processes grouped by the stacks of their threads, in snapshot order within each."""

    def __init__(self, processes: Sequence[Process]) -> None:
        self.processes = processes
        self._groups: dict[tuple[int, ...], tuple[tuple[Frames, ...], list[Process]]] | None = None
        self._having: dict[Callable[[Frames], object], list[Process]] = {}
        self._has_file: dict[str, bool] = {}
        self._order: list[list[Process]] = []  # each process's group, in snapshot order

    def groups(self) -> list[tuple[tuple[Frames, ...], list[Process]]]:
        """(the stacks of its threads, the processes that have them), built once."""
        if self._groups is None:
            self._groups = {}
            order = self._order = []
            # The group found last: a job's ranks mostly have their neighbour's stacks, told
            # by identity (classify interns them) without a key built and hashed per rank.
            stacks: tuple[Frames, ...] = ()
            members: list[Process] = []
            for p in self.processes:
                threads = p.threads
                if not (members and len(threads) == len(stacks)
                        and all(map(operator.is_, map(_FRAMES, threads), stacks))):
                    # Each entry holds its stacks, so the ids in its key cannot be reused.
                    key = tuple(map(id, map(_FRAMES, threads)))
                    entry = self._groups.get(key)
                    if entry is None:
                        entry = self._groups[key] = (tuple(map(_FRAMES, threads)), [])
                    stacks, members = entry
                members.append(p)
                order.append(members)
        return list(self._groups.values())

    def stacks(self) -> list[Frames]:
        """Every distinct stack of the snapshot, once."""
        return list({id(s): s for stacks, _ in self.groups() for s in stacks}.values())

    def has_file(self, suffix: str) -> bool:
        """Whether a Python frame of any of the stacks runs in a file ending with ``suffix``."""
        found = self._has_file.get(suffix)
        if found is None:
            found = self._has_file[suffix] = any(f.endswith(suffix) for f in self._files)
        return found

    @cached_property
    def _files(self) -> set[str]:  # of the Python frames, each distinct stack once
        return {f.file for s in self.stacks() for f in s if f.file and not f.native}

    def having(self, fact: Callable[[Frames], object]) -> list[Process]:
        """The processes with a thread whose stack has ``fact`` (a truthy answer), in
        snapshot order."""
        found = self._having.get(fact)
        if found is None:
            groups = [procs for stacks, procs in self.groups()
                      if any(fact(frames) for frames in stacks)]
            if len(groups) > 1:  # several sets of stacks: the snapshot's order, in one pass
                chosen = {id(procs) for procs in groups}
                found = [p for p, procs in zip(self.processes, self._order, strict=True)
                         if id(procs) in chosen]
            else:
                found = groups[0] if groups else []
            self._having[fact] = found
        return found


# The last index built, with the processes it holds: the wait graph and the findings ask of
# the same processes tuple (``replace`` keeps it), so its groups are built once per analysis.
# ``analyze`` releases it when it returns: held on, it would keep a whole job's processes
# alive after the caller dropped them (131,072 ranks: the next run's memory all fresh pages).
_last: list[StackIndex] = []


def release() -> None:
    """Drop the shared index (and the processes it holds)."""
    _last.clear()


def index_of(processes: Sequence[Process]) -> StackIndex:
    """The StackIndex of ``processes``, shared by every caller that asks of the same tuple."""
    if _last and _last[0].processes is processes:
        return _last[0]
    index = StackIndex(processes)
    _last[:] = [index]
    return index
