"""Equal stacks decoded to one tuple: the ranks of a merged job share their frames.

A job of 131,072 ranks merged from one dump per node has a handful of distinct stacks, each
repeated by thousands of ranks. Decoded afresh, each rank's ~40 frames cost ~250 us (33 s
at 131,072 ranks), and the analysis then reads every frame's fields again to find that the
stacks are equal (classify's interning, ~1 s). Here a stack whose JSON equals the one decoded
last (mostly a rank's neighbour, in its node's file or the file before) is that one's tuple,
not decoded again; and each stack decoded is looked up among those kept, so that equal stacks
are one tuple, which classify and the per-stack facts then find by identity. The sampler's
py-spy parse keeps its stacks the same way (``kept_stack``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hangscope.model import Frame

Frames = tuple[Frame, ...]
#: Distinct stacks kept across the dumps of one merge; a real job has tens.
LIMIT = 4096


def shared_stacks(decode: Callable[[Any], Frames]) -> Callable[[Any], Frames]:
    """``decode`` (JSON list -> frames), giving equal stacks one tuple."""
    kept: dict[Frames, Frames] = {}
    last: list[Any] = [None, ()]  # the JSON list decoded last, and its tuple

    def decoded(value: Any) -> Frames:
        # (Python's equality: a list equal to the last one but for a 1 where it had true reads
        # as that stack, where the decoder alone would refuse the 1 for a boolean field.)
        if value == last[0]:
            return last[1]  # type: ignore[no-any-return]
        frames = decode(value)
        found = kept.get(frames)
        if found is None:
            if len(kept) >= LIMIT:
                kept.clear()
            kept[frames] = found = frames
        last[0], last[1] = value, found
        return found

    return decoded


_kept: dict[Frames, Frames] = {}


def kept_stack(frames: Frames) -> Frames:
    """The one tuple kept equal to ``frames`` (``frames`` itself the first time): the parse of
    each process's py-spy dump gives equal stacks one tuple, as the merge's decoder does.

    Compared after parsing (a frame's source facts are part of it: a file that changed makes
    a new stack). The sampler parses its dumps on a pool's threads: each dict operation is
    atomic, and a race at worst keeps two equal tuples.
    """
    found = _kept.get(frames)
    if found is None:
        if len(_kept) >= LIMIT:
            _kept.clear()
        found = _kept.setdefault(frames, frames)
    return found
