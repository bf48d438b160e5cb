"""Python's cycle collector paused while hangscope builds or walks large acyclic data.

The analysis (``hangscope.analyze``, analyze/evidence/collectives.py) and the Flight Recorder parser
(collect/fr_parse.py, which pauses it inline: see parse_dump) allocate many objects and make
no reference cycles; but every allocation counts towards the collector's thresholds, and each
full collection walks every object alive.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the duration (back on after, if it was on).

    The analysis allocates a few objects per rank and makes no reference cycles; but every
    allocation counts towards the collector's thresholds, and each full collection walks every
    object alive, the whole Snapshot included: ~8 million objects for 131,072 ranks, seconds a
    time, for nothing to collect. A Flight Recorder dump of 2,000 entries with stacks is some
    30,000 dicts and lists when unpickled: 32 of them took 0.55 s to load with the collector
    on, 0.15 s without.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            _promote_young()
            gc.enable()


def _promote_young() -> None:
    """Move every object the collector tracks to its oldest generation.

    While paused, every object made counts as young: back on, the first allocation sets off a
    young collection that walks all of them (the whole analysed job: 0.16 s of 1.4 s at 32,768
    ranks, most of what it made still alive in the result), and they climb one generation at a
    time after. They hold no cycle, so the young passes would find nothing: they go straight
    to the oldest generation, which full collections still walk, as before.
    ``freeze()`` then ``unfreeze()`` is that move (two list splices); skipped where the
    program froze objects of its own (``unfreeze`` would thaw them too).
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
