"""The verdict rule for a rank that failed: its NCCL/c10d error leads (issue 19, item 3).

"rank 0 failed: NCCL invalid usage (sizes differ between ranks) in all_gather (#2) at
step (train.py:57); rank 1 waits in all_gather ...": the error in a rank's output, its
watchdog's state and an exiting main thread, then who waits for it. A remote error (a peer
exited) does not lead where a process of the job died: the dead one does.
"""

from __future__ import annotations

import signal

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.failures import RankFailure, failures
from hangscope.analyze.evidence.roles import is_helper_role
from hangscope.model import Category, Process, Role, Severity, Verdict, VerdictKind
from hangscope.words import short_who, verb, who

# Where a failed rank's host thread stands, as a call site worth naming.
_SITE_CATEGORIES = frozenset({Category.COLLECTIVE, Category.CUDA_SYNC, Category.CUDA_LAUNCH})


def _exit_text(proc: Process) -> str:
    code = proc.exit_code
    if code is None:
        return "exited"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _failed_text(proc: Process | None, failure: RankFailure) -> str:
    name = who(proc) if proc is not None else f"rank {failure.rank}"
    text = f"{name} failed: {failure.kind}"
    if failure.op:
        text += f" in {failure.op}" + (f" (#{failure.seq})" if failure.seq is not None else "")
    working = proc.working_thread if proc is not None else None
    site = failure.site
    # The host thread's line names the failed collective only while it still waits in that
    # op, or waits for its GPU with no other collective on the stack (an NCCL op is async:
    # the host waits at its next sync); a thread gone on to another collective does not.
    if site is None and working is not None and working.site and working.category in \
            _SITE_CATEGORIES and (working.op == failure.op if working.category is
                                  Category.COLLECTIVE else working.op is None):
        site = working.site
    return text + (f" at {site}" if site else "")


def _state_text(proc: Process | None, failure: RankFailure) -> list[str]:
    bits = []
    if failure.watchdog:
        bits.append(f"its watchdog: {failure.watchdog}")
    if proc is not None:
        working = proc.working_thread
        if proc.is_exited:
            bits.append(f"it {_exit_text(proc)}")
        elif working is not None and working.context == "shutdown":
            bits.append("its main thread is exiting")
    return bits


def rank_failed(facts: Facts) -> Verdict | None:
    """A rank's output says an NCCL/c10d collective failed: it leads the verdict."""
    found = failures(facts.snapshot.processes)
    if not found:
        return None
    by_rank = {p.rank.global_rank: p for p in facts.subjects
               if p.rank is not None and p.rank.global_rank is not None}
    local = [f for f in found.values() if not f.blames_peer]
    # Any process of the job that died (a killed rank has lost its environment, so its role)
    dead = [p for p in facts.snapshot.processes if p.is_exited
            and p.exit_code not in (None, 0) and p.role is not Role.LAUNCHER
            and not is_helper_role(p.role)]
    lead: list[str] = []
    suspects: list[Process] = []
    shown = sorted(local or found.values(), key=lambda f: f.rank)
    if not local and dead:
        lead = [f"{who(p)} {_exit_text(p)}" for p in dead[:3]]
        suspects = dead
        lead += [_failed_text(by_rank.get(f.rank), f).replace(" failed:", " failed after it:", 1)
                 for f in shown[:2]]
    else:
        lead = [_failed_text(by_rank.get(f.rank), f) for f in shown[:3]]
        suspects = [p for f in shown if (p := by_rank.get(f.rank)) is not None]
    failed_ranks = {f.rank for f in shown}
    waiting = [p for p in facts.subjects if not p.is_exited and p not in suspects
               and (p.rank is None or p.rank.global_rank not in failed_ranks)]
    waits = []
    for proc in waiting[:4]:
        working = proc.working_thread
        category = facts.categories.get(proc.key, Category.UNKNOWN)
        site = f" at {working.site}" if working is not None and working.site else ""
        waits.append(f"{short_who(proc)} {verb(category, op=working.op if working else None)}"
                     f"{site}")
    summary = "; ".join(lead)
    summary = summary[0].upper() + summary[1:]
    if waits:
        summary += ". Meanwhile " + "; ".join(waits)
    evidence = []
    for failure in shown[:4]:
        proc = by_rank.get(failure.rank)
        extra = _state_text(proc, failure)
        evidence.append(f"rank {failure.rank}'s output: {failure.line}"
                        + (f" ({'; '.join(extra)})" if extra else ""))
    return Verdict(VerdictKind.RANK_FAILED, Severity.CRITICAL, summary + ".",
                   tuple(p.pid for p in suspects), tuple(evidence),
                   tuple(p.host for p in suspects))
