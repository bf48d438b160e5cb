"""The verdict rule for a job that is paused or idle, not hung (analyze/patterns/calm/calm.py
decides).

One row of the table in analyze/rules/, before *all waiting*: a job whose every process waits for
nobody in it (a server with no request in flight and its idle clients, a sleep between phases)
is said to be so, with the evidence, and never called stuck.
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.progress import DECIDED_BY, IDLE, PAUSED
from hangscope.model import Category, Process, Severity, Verdict, VerdictKind
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


def held_stopped(facts: Facts) -> Verdict | None:
    """Processes stopped (SIGSTOP, state T) whose parent, alive and not stopped, sleeps in its
    own loop, while nothing else works: a scheduler holding its jobs (a reservation, a
    preemption) until it sends SIGCONT. A stopper that died, or a parent that waits on them,
    is another story (the missing-rank and wait-for rules); ranks stay those rules' too."""
    if facts.has_ranks:
        return None
    procs = {p.pid: p for p in facts.processes}
    stopped = [p for p in facts.subjects if p.state == "T"]
    if not stopped:
        return None
    parents = {p.ppid for p in stopped}
    holders = [procs[pid] for pid in parents if pid in procs]
    if len(holders) != len(parents) or any(
            h.is_exited or h.is_stopped or h.tracer is not None
            or (h.working_thread is None or h.working_thread.category is not Category.SLEEP)
            for h in holders):
        return None
    if any(p.state != "T" and p.pid not in parents and p.category is not Category.SLEEP
           for p in facts.subjects):
        return None  # something else waits or works: not a plain hold
    names = ", ".join(f"PID {p.pid}" for p in stopped[:6]) + (
        f" and {len(stopped) - 6} more" if len(stopped) > 6 else "")
    holder = holders[0]
    working = holder.working_thread
    where = f" at {working.site}" if working is not None and working.site else ""
    summary = (f"Paused, not hung: {names} {'are' if len(stopped) > 1 else 'is'} stopped "
               f"(state T: SIGSTOP) and {'their' if len(stopped) > 1 else 'its'} parent "
               f"{_name(holder)}, alive and not stopped, sleeps{where}: a scheduler holding its "
               "jobs (a reservation, a preemption) resumes them with SIGCONT. If nothing should "
               "have paused them, resume them (kill -CONT PID) and dump again.")
    lines = tuple(f"{_name(p)}, state T, parent PID {p.ppid}" for p in stopped[:6])
    return Verdict(VerdictKind.PAUSED, Severity.INFO, summary, (), lines)


def all_stopped(facts: Facts) -> Verdict | None:
    """Every live process of the job is stopped by a signal (state T, no tracer): the whole
    job was suspended at once, as ``scontrol suspend``, a preemption or ``kill -STOP`` of the
    process group leaves it. Nothing in it waits for anything: it was paused on purpose, and
    SIGCONT resumes it. One stopped process among running ones is the missing-rank rule's."""
    live = []
    for p in facts.processes:  # (the first live one not stopped answers: most often a rank)
        if p.is_exited:
            continue
        if p.state != "T" or p.tracer is not None:
            return None
        live.append(p)
    if len(live) < 2:
        return None
    names = ", ".join(f"PID {p.pid}" for p in live[:6]) + (
        f" and {len(live) - 6} more" if len(live) > 6 else "")
    pids = " ".join(str(p.pid) for p in live)
    summary = (f"Paused, not hung: every process of the job ({len(live)}: {names}) is stopped "
               "(state T: SIGSTOP), as `scontrol suspend`, a preemption or a stop of the "
               "whole process group leaves it. If nothing should have paused it, resume it "
               f"(`kill -CONT {pids}` or `scontrol resume`) and dump again.")
    lines = tuple(f"{_name(p)}, state T, parent PID {p.ppid}" for p in live[:6])
    return Verdict(VerdictKind.PAUSED, Severity.INFO, summary, (), lines)
