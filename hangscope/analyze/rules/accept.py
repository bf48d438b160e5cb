"""The verdict rules for a server that cannot take what it is sent: connections no thread of
it will accept (analyze/patterns/ends/unaccepted.py), a process out of file descriptors
(analyze/patterns/ends/fdlimit.py).
Both come before the calm rule, which would call such a server idle."""

from __future__ import annotations

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.patterns.ends.fdlimit import exhausted, exhausted_words
from hangscope.analyze.patterns.ends.unaccepted import unaccepted, unaccepted_words
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.model import Severity, Verdict, VerdictKind
from hangscope.words import who


def unaccepted_connections(facts: Facts) -> Verdict | None:
    """A listener of the job has connections queued that no thread accepts or watches."""
    found = [u for u in unaccepted(facts.snapshot) if u.proc.key not in facts.moving]
    if not found:
        return None
    first = found[0]
    working = first.proc.working_thread
    where = f" at {working.site}" if working is not None and working.site else ""
    said = [line.strip() for line in (*first.proc.log_errors, *first.proc.log_tail)
            if "accept" in line.lower() or "connection" in line.lower()]
    summary = (f"Connections nobody accepts: {who(first.proc)}{where}: "
               f"{unaccepted_words(first)}."
               + (f" Its output says: {said[-1][:160]!r}." if said else ""))
    return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary,
                   tuple(u.proc.pid for u in found), evidence(facts),
                   tuple(u.proc.host for u in found))


def fd_exhausted(facts: Facts) -> Verdict | None:
    """A process of the stuck job has no file descriptor left under its RLIMIT_NOFILE."""
    # (one that moves counts when its own output says EMFILE: it retries what fails)
    found = [e for e in exhausted(facts.snapshot) if e.proc.key not in facts.moving or e.said]
    if not found or not facts.stuck:
        return None
    first = found[0]
    summary = f"Out of file descriptors: {who(first.proc)} has {exhausted_words(first)}."
    return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary,
                   tuple(e.proc.pid for e in found), evidence(facts),
                   tuple(e.proc.host for e in found))
