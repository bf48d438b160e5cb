"""A serving engine paused on request and never resumed, while clients wait on it.

An engine built for RL loops pauses on request (vLLM's ``POST /pause`` or
``pause_generation()``: its scheduler schedules nothing, and with ``mode=keep`` holds the
requests it has) until someone resumes it. The code that paused it for a weight update must
resume it on every path; one that forgets (AReaL#1160: the disk weight-update path never
called ``continue_generation``) leaves every later request waiting on a live, responsive
server whose loops all idle: nothing in the stacks is wrong, the engine's own log says why
(``Framework.pause_lines``: its last pause line and no resume after it). Only where no
subject moved over the window, and some process waits on the engine (an edge of the wait-for
graph into one of its processes): a paused engine nobody waits on is paused, not hung.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.roles import is_helper_role
from hangscope.analyze.evidence.working import progressing_pids
from hangscope.analyze.graph.liveness import BUSY_PERCENT
from hangscope.analyze.graph.waitwalk import site_words
from hangscope.analyze.patterns.calm.engines import open_requests, tcp_ports
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.frameworks import FRAMEWORKS
from hangscope.model import Category, Process, Severity, Verdict, VerdictKind
from hangscope.words import who, who_list


def paused_engine(facts: Facts) -> Verdict | None:
    snap = facts.snapshot
    if facts.moving or progressing_pids(snap) or snap.wait_graph is None:
        return None
    for framework in FRAMEWORKS:
        if framework.pause_lines is None or snap.job.kind != framework.name:
            continue  # (the logs of 131,072 ranks are read only for a job of that engine)
        text = _last_pause(snap.processes, *framework.pause_lines)
        if text is None:
            continue
        served = {p.pid for p in snap.processes if p.listening}
        # a request is a connection to the engine's front (HTTP over TCP, or a Unix socket)
        waiters = list(dict.fromkeys(
            e.pid for e in snap.wait_graph.edges if e.kind in ("tcp", "unix")
            and e.to_pid in served and e.pid not in served and not e.probable))
        procs = [p for p in snap.processes if p.pid in waiters and not p.is_exited
                 and not is_helper_role(p.role)]
        fronts = [(p, ports) for p in snap.processes if (ports := tcp_ports(p))]
        ports = set().union(*(ports for _, ports in fronts))
        kernel = snap.waits.kernel if snap.waits is not None else None
        # clients outside the job: their requests' connections to its port, still open
        outside = open_requests(kernel, ports) if kernel is not None and not procs else 0
        if not fronts or not (procs or outside):
            # Nobody waits on it from outside: paused, not hung, where the process that
            # paused it is seen at work (an RL loop training between its rollouts; with every
            # process idle, its own coroutines may wait on a pause nobody will lift).
            return _paused_for_work(facts, framework.name, text)
        front = fronts[0][0]
        if procs:
            site = site_words(procs[0].working_thread)
            verb = "waits" if len(procs) == 1 else "wait"
            waiting = f"{who_list(procs)} {verb}{site} for {who(front)}"
        else:
            waiting = (f"{outside} connection{'s' if outside > 1 else ''} to its port "
                       f"{', '.join(map(str, sorted(ports)))} wait for an answer from "
                       f"{who(front)}")
        summary = (
            f"Paused and never resumed: {framework.name}'s log says \"{text[:200]}\" and no "
            f"resume since, so it schedules no request; {waiting}, which idles with the "
            "requests held. Something paused the engine "
            "(POST /pause, pause_generation(): an RL loop's weight update) and no path resumed "
            "it: resume it (POST /resume, resume_generation()) after every pause, in a "
            "finally, including the paths that fail or return early.")
        blamed = procs or [front]  # the client that waits (and likely paused it)
        return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary,
                       tuple(p.pid for p in blamed), evidence(facts),
                       tuple(p.host for p in blamed))
    return None


def _paused_for_work(facts: Facts, name: str, text: str) -> Verdict | None:
    """A paused engine that nobody outside waits on, while a Python thread of the job's own
    (no helper) computes on most of a CPU: it pauses for that work."""
    busy = [p for p in facts.processes if not p.is_exited and not is_helper_role(p.role)
            and (p.cpu_percent or 0.0) >= BUSY_PERCENT and p.python is not False]
    if not busy:
        return None
    proc = max(busy, key=lambda p: p.cpu_percent or 0.0)
    thread = next((t for t in proc.threads if t.python and not t.helper
                   and t.category is Category.RUNNING), None)
    doing = (f" (thread {thread.name or thread.tid}{site_words(thread)})"
             if thread is not None else "")
    summary = (f"Paused, not hung: {name}'s log says \"{text[:200]}\" and no resume since, "
               f"and nothing outside the job waits on it; {who(proc)} computes on "
               f"{proc.cpu_percent or 0:.0f}% of a CPU{doing}: the loop that paused the engine "
               "(pause_generation(), POST /pause: an RL loop's weight update) works before it "
               "resumes it. Dump again after that step: the engine's log says when it resumes; "
               "if it never does, the resume is missing from a path.")
    return Verdict(VerdictKind.PAUSED, Severity.INFO, summary, (), evidence(facts))


def _last_pause(processes: Sequence[Process], paused: re.Pattern[str],
                resumed: re.Pattern[str]) -> str | None:
    """The engine's pause line, from where it matches, in a log whose last pause or resume
    line is a pause; None where none is."""
    for proc in processes:
        said = [m for t in proc.log_tail if (m := paused.search(t) or resumed.search(t))]
        if said and said[-1].re is paused:
            return said[-1].string[said[-1].start():].strip()
    return None
