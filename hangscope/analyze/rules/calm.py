"""The verdict rule for a job that is paused or idle, not hung (analyze/calm.py decides).

One row of the table in analyze/rules/, before *all waiting*: a job whose every process waits for
nobody in it (a server with no request in flight and its idle clients, a sleep between phases)
is said to be so, with the evidence, and never called stuck.
"""

from __future__ import annotations

from hangscope.analyze.facts import Facts
from hangscope.analyze.progress import DECIDED_BY, IDLE, PAUSED
from hangscope.model import Process, Severity, Verdict, VerdictKind
from hangscope.words import short_who

_KIND = {IDLE: VerdictKind.IDLE, PAUSED: VerdictKind.PAUSED}
_HEAD = {IDLE: "Idle, not hung: the job waits for work nobody has asked for",
         PAUSED: "Paused, not hung: the job sleeps between phases"}


def calm(facts: Facts) -> Verdict | None:
    """Every subject is paused or idle (its measured decision, rewritten by calm.py)."""
    progress = facts.snapshot.progress
    if progress is None or progress.decision not in _KIND:
        return None
    lines, parts = [], []
    for proc in facts.subjects:
        measured = facts.progress.get(proc.key)
        if measured is None:
            continue
        working = proc.working_thread
        where = f" at {working.site}" if working is not None and working.site else ""
        parts.append(f"{_name(proc)} is {measured.decision}{where}")
        lines.append(f"{_name(proc)}, state {proc.state or '?'}: "
                     f"{measured.decision} ({DECIDED_BY[measured.evidence]}): {measured.reason}")
    summary = (f"{_HEAD[progress.decision]}: " + "; ".join(parts) + ". No request is in flight: "
               "nothing in the job waits for an answer, only for work or for a timer; send it "
               "work (or wait for its next phase) and dump again if it does not move.")
    return Verdict(_KIND[progress.decision], Severity.INFO, summary, (), tuple(lines))


def _name(proc: Process) -> str:
    """``rank 3 (PID 12)``, ``PID 12``."""
    name = short_who(proc)
    return name if name.startswith("PID") else f"{name} (PID {proc.pid})"
