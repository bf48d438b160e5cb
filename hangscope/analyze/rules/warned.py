"""A framework's own warning that its parties stall, while the job is stuck.

Some frameworks watch their own parties and say in the job's log when one waits for the others
too long (Ray Data's split coordinator: "StreamSplitDataIterator(epoch=0, split=0) blocked
waiting on other clients for more than 30s", ray#42008). The process that waits on it shows
only a queue or a get on its stack; the warning says why, and the framework's words what to do
(``Framework.stall_warnings``). Only where no subject moved over the window: a warning from a
stall that has since passed says nothing of now.
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.working import progressing_pids
from hangscope.analyze.graph.waitwalk import site_words
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.frameworks import STALL_WARNINGS, dispatches
from hangscope.model import Process, Severity, Thread, Verdict, VerdictKind
from hangscope.words import who_list


def framework_warned(facts: Facts) -> Verdict | None:
    if not STALL_WARNINGS or facts.moving or progressing_pids(facts.snapshot):
        return None
    for warning in STALL_WARNINGS:
        found = None
        for proc in facts.processes:
            for line in (*proc.log_errors, *proc.log_tail):
                if (match := warning.line.search(line)) is not None:
                    found = (match, line)
        if found is None:
            continue
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
        summary = (f"A stall its framework reported: {who_list(waiters)} waits"
                   f"{site_words(waiting[waiters[0].pid])}; the job's log says "
                   f"\"{text[:240]}\". " + warning.words.format(**match.groupdict()) + ".")
        return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary,
                       tuple(p.pid for p in waiters), evidence(facts),
                       tuple(p.host for p in waiters))
    return None


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
