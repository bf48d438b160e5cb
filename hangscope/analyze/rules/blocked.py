"""Words for the odd rank of a straggler verdict that does not work but is blocked elsewhere.

README's straggler computes or compiles while the others wait for it. A rank that waits on a
lock, a pipe or a FIFO instead is blocked elsewhere; one whose main thread sits in
``threading._shutdown`` has left its main code and is exiting, joining a non-daemon thread;
one in multiprocessing's ``_exit_function`` is exiting too, joining a non-daemon child process.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.evidence.facts import BUSY, Facts
from hangscope.analyze.rules.exiting import exiting_words
from hangscope.model import Process


def straggler_head(facts: Facts, odd: Sequence[Process]) -> str:
    """``Straggler: `` when an odd rank works, ``Blocked elsewhere: `` when none does."""
    working = any(facts.categories[p.key] in BUSY for p in odd)
    return "Straggler: " if working else "Blocked elsewhere: "


def exiting_note(odd: Sequence[Process]) -> str:
    """`` (rank 0 is exiting: ...)`` for the odd ranks that are exiting; empty otherwise."""
    notes = [w for p in odd if (w := exiting_words(p)) is not None]
    return f" ({'; '.join(notes)})" if notes else ""
