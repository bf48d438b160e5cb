"""Where a rank called collectives during the progress window (``py-spy record`` raw stacks).

The dense samples of a rank that keeps running show every collective it passes through, not
only the one it sits in when the three stack samples are taken. That is the normal path of its
replica: a tie between two stuck ranks of another replica is broken by it (analyze/rules/).
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.classify import classify_thread
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.model import Category, Frame, Thread
from hangscope.model.progress import ThreadProgress

#: ``func (file:line)``, py-spy's collapsed frame.
_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")

#: Distinct stacks classified per thread at most: a busy rank has tens, not thousands.
_MAX_STACKS = 200


def parse_frame(text: str) -> Frame:
    """py-spy's collapsed ``func (file:line)`` as a Frame (the name alone when it is not)."""
    match = _FRAME.match(text)
    if match is None:
        return Frame(name=text)
    return Frame(name=match["name"], file=match["file"], line=int(match["line"]))


def signature(op: str, site: str | None) -> str:
    """``all_reduce at tp_sync (train.py:16)``: one collective call, as groups name it."""
    return f"{op} at {site}" if site else op


def collective_sites(thread: ThreadProgress | None) -> tuple[str, ...]:
    """The collectives (op and call site) this thread was sampled in, most sampled first."""
    if thread is None:
        return ()
    out: dict[str, None] = {}
    for stack in thread.stacks[:_MAX_STACKS]:
        frames = tuple(parse_frame(f) for f in reversed(stack.frames))  # innermost first
        seen = classify_thread(Thread(tid=thread.tid, frames=frames))
        if seen.category is Category.COLLECTIVE and seen.op and not is_p2p(seen.op):
            out[signature(seen.op, seen.site)] = None
    return tuple(out)
