"""A framework's own warning that its parties stall, while the job is stuck.

Some frameworks watch their own parties and say in the job's log when one waits for the others
too long (Ray Data's split coordinator: "StreamSplitDataIterator(epoch=0, split=0) blocked
waiting on other clients for more than 30s", ray#42008), or that it restarts one again and
again (a Ray actor that dies in its constructor, retried for ever). The process that waits on
it shows only a queue or a get on its stack; the warning says why, and the framework's words
what to do (``Framework.stall_warnings``). Only where no subject moved over the window: a
warning from a stall that has since passed says nothing of now (the start-up of a party
restarted between deaths is no move).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.working import progressing_pids
from hangscope.analyze.graph.waitwalk import site_words
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.frameworks import STALL_WARNINGS, StallWarning, dispatches
from hangscope.model import Process, Severity, Thread, Verdict, VerdictKind
from hangscope.words import who_list


def framework_warned(facts: Facts) -> Verdict | None:
    if not STALL_WARNINGS:
        return None
    going: set[int] | None = None  # the subjects that moved, once a warning is found
    for warning in STALL_WARNINGS:
        found = None
        for proc in facts.processes:
            for line in (*proc.log_errors, *proc.log_tail):
                if (match := warning.line.search(line)) is not None:
                    found = (match, line)
        if found is None:
            continue
        if going is None:
            going = {key[1] for key in facts.moving} | progressing_pids(facts.snapshot)
        if going - _churning(warning, found[0], facts.processes):
            continue  # (a subject moved: a warning from a stall that has since passed)
        # Any thread of a subject in the framework's frames: the thread that consumes the
        # framework's output need not be the one the window picked as working (a driver whose
        # main thread sleeps between polls of a thread that iterates the pipeline).
        waiting = {p.pid: t for p in facts.subjects if not p.is_exited
                   for t in _ordered(p) if any(
                       not f.native and warning.waiter_path in (f.file or "")
                       for f in t.frames)}
        waiters = [p for p in facts.subjects if p.pid in waiting]
        if not waiters:
            continue
        match, line = found
        text = line[line.find(match.group(0)):].strip()
        said = _cause(warning, match, facts.processes)
        why = f", and the line that says why, \"{said[:240]}\"" if said else ""
        summary = (f"A stall its framework reported: {who_list(waiters)} waits"
                   f"{site_words(waiting[waiters[0].pid])}; the job's log says "
                   f"\"{text[:240]}\"{why}. " + warning.words.format(**match.groupdict()) + ".")
        return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary,
                       tuple(p.pid for p in waiters), evidence(facts),
                       tuple(p.host for p in waiters))
    return None


def _churning(warning: StallWarning, match: re.Match[str],
              processes: Sequence[Process]) -> set[int]:
    """The PIDs of the party the warning says dies and is started again
    (``StallWarning.churns``), where one of them died during the dump: their moves are
    start-ups between deaths, not progress."""
    if not warning.churns:
        return set()
    title = re.compile(_formatted(warning.churns, match))
    party = [p for p in processes if title.search(p.title or "")]
    return {p.pid for p in party} if any(p.is_gone for p in party) else set()


def _formatted(template: str, match: re.Match[str]) -> str:
    """``template`` with the match's named groups, escaped for a pattern."""
    return template.format(**{k: re.escape(v) for k, v in match.groupdict().items()
                              if v is not None})


def _cause(warning: StallWarning, match: re.Match[str],
           processes: Sequence[Process]) -> str | None:
    """The last line of the log that says why (``StallWarning.cause``), or None."""
    if not warning.cause:
        return None
    pattern = re.compile(_formatted(warning.cause, match))
    said = None
    for proc in processes:
        for line in (*proc.log_errors, *proc.log_tail):
            if (found := pattern.search(line)) is not None:
                said = (found.groupdict().get("said") or found.group(0)).strip()
    return said


def _ordered(proc: Process) -> list[Thread]:
    """The process's threads, the one to name last (the one a dict keeps when several
    qualify): its working thread, unless that is the framework's scheduler going round (Ray
    Data's executor), whose line says less than the consumer's blocked get."""
    working = proc.working_thread
    if working is not None and dispatches(working.name):
        working = None
    others = [t for t in proc.threads if t is not working]
    return [*(t for t in others if dispatches(t.name)),
            *(t for t in others if not dispatches(t.name)), *([working] if working else [])]
