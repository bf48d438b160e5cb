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
from hangscope.frameworks import STALL_WARNINGS
from hangscope.model import Severity, Verdict, VerdictKind
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
        waiters = [p for p in facts.subjects if not p.is_exited
                   and (w := p.working_thread) is not None
                   and any(not f.native and warning.waiter_path in (f.file or "")
                           for f in w.frames)]
        if not waiters:
            continue
        match, line = found
        text = line[line.find(match.group(0)):].strip()
        summary = (f"A stall its framework reported: {who_list(waiters)} waits"
                   f"{site_words(waiters[0].working_thread)}; the job's log says "
                   f"\"{text[:240]}\". " + warning.words.format(**match.groupdict()) + ".")
        return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary,
                       tuple(p.pid for p in waiters), evidence(facts),
                       tuple(p.host for p in waiters))
    return None
