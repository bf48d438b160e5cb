"""One answer per distinct stack: a fact of a thread's frames, computed once for every rank
that shares them.

``classify`` interns every stack it classifies (equal frames -> one tuple), so the ranks of a
job of 131,072 ranks, which have a handful of distinct stacks, share a handful of tuples: a
fact keyed by the tuple's identity is computed a handful of times, not once per rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hangscope.model import Frame

_R = TypeVar("_R")
Frames = tuple[Frame, ...]
#: Entries kept per fact; a real job has tens of distinct stacks, a long live session more.
LIMIT = 8192


def per_stack(fact: Callable[[Frames], _R]) -> Callable[[Frames], _R]:
    """``fact(frames)``, remembered per frames tuple (by identity: no hashing of frames)."""
    # Each entry holds its tuple, so the id() it is keyed by cannot be reused while stored.
    memo: dict[int, tuple[Frames, _R]] = {}

    def remembered(frames: Frames) -> _R:
        found = memo.get(id(frames))
        if found is not None and found[0] is frames:
            return found[1]
        if len(memo) >= LIMIT:
            memo.clear()
        value = fact(frames)
        memo[id(frames)] = (frames, value)
        return value

    remembered.__doc__ = fact.__doc__
    remembered.__name__ = fact.__name__
    return remembered
