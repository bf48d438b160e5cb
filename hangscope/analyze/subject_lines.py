"""The evidence lines every verdict shares: one per subject (who, state, CPU, wait channel,
whether its stack moved, and what the progress watcher decided)."""

from __future__ import annotations

from hangscope.analyze.facts import Facts
from hangscope.analyze.progress import DECIDED_BY
from hangscope.words import short_who


def evidence(facts: Facts) -> tuple[str, ...]:
    """One line per subject: who, state, CPU, wait channel, whether its stack moved."""
    lines = []
    for proc in facts.subjects:
        working = proc.working_thread
        bits = [f"{short_who(proc)} (PID {proc.pid})",
                f"state {proc.state or '?'}"]
        if proc.cpu_percent is not None:
            bits.append(f"CPU {proc.cpu_percent:.0f}%")
        if working is not None:
            if working.wchan:
                bits.append(f"wchan {working.wchan}")
            if working.samples > 1:
                bits.append("stack unchanged in all "
                            f"{working.samples} samples" if working.stuck else "stack moved")
        measured = facts.progress.get(proc.key)
        if measured is not None:  # which evidence decided, in its own words
            bits.append(f"{measured.decision} ({DECIDED_BY[measured.evidence]}): "
                        f"{measured.reason}")
        lines.append(", ".join(bits))
    return tuple(lines)
