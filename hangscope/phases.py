"""Where a cold ``hangscope dump`` spends its time: ``--verbose`` prints the phases on stderr.

A dump's fixed cost (the interpreter, imports, discovery, analysis, rendering) is what a user
pays above py-spy's own floor on every call, so it is measured where it happens, not guessed
(issue 22). Marks are wall-clock offsets from the interpreter's start (its /proc start time,
which has the kernel's 10 ms tick: the first phase is that coarse, the rest are exact).
"""

from __future__ import annotations

import sys
import time

_marks: list[tuple[str, float]] = []


def mark(name: str) -> None:
    """The phase ``name`` ended now."""
    _marks.append((name, time.perf_counter()))


def breakdown() -> list[tuple[str, float]]:
    """Each phase and its seconds, in order."""
    from hangscope.collect.procfs import seconds_alive

    out, last = [], time.perf_counter() - seconds_alive()
    for name, at in _marks:
        out.append((name, max(0.0, at - last)))
        last = at
    return out


def report(stream: object = None) -> None:
    """One line on stderr: ``phases: start 0.04 s, imports 0.11 s, ... total 0.52 s``."""
    parts = breakdown()
    if not parts:
        return
    total = sum(s for _, s in parts)
    text = ", ".join(f"{name} {s:.3f} s" for name, s in parts)
    print(f"hangscope: phases: {text}; total {total:.3f} s", file=stream or sys.stderr)
