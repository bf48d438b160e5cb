"""Findings: the checks an engineer runs by hand, each a sentence with its evidence.

Pure functions over a Snapshot. Each check returns zero or more Findings; ``find_all`` orders
them by severity and drops any that would only repeat the verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hangscope.analyze.group import compact_ranks
from hangscope.model import Finding, Role, Severity, Snapshot, VerdictKind, rank_id

Check = Callable[[Snapshot], Iterable[Finding]]


def _ranks(snap: Snapshot):
    return [p for p in snap.processes if p.role is Role.RANK]


def check_expected_ranks(snap: Snapshot) -> Iterable[Finding]:
    """``--tp-size 8`` should mean 8 ranks: say how many exist."""
    expected = snap.job.expected_ranks
    if expected is None:
        return
    found = len(_ranks(snap))
    if found < expected:
        yield Finding("ranks.missing", Severity.CRITICAL,
                      f"Expected {expected} ranks ({snap.job.expected_source}) but found {found}.",
                      {"expected": expected, "found": found, "source": snap.job.expected_source})
    else:
        yield Finding("ranks.count", Severity.INFO,
                      f"All {expected} expected ranks are running ({snap.job.expected_source}).",
                      {"expected": expected, "found": found})


def check_listening(snap: Snapshot) -> Iterable[Finding]:
    """The server's ``--port``: is anyone in the job listening on it?"""
    port_text = snap.job.args.get("--port")
    held = [(p.pid, s) for p in snap.processes for s in p.listening if s.kind != "unix"]
    if port_text and port_text.isdigit():
        port = int(port_text)
        owners = [pid for pid, s in held if s.port == port]
        if owners:
            yield Finding("listen.ok", Severity.INFO,
                          f"Port {port} is open, held by PID {owners[0]}.",
                          {"port": port, "pids": owners})
        else:
            launcher = snap.job.launcher
            others = sorted({s.port for _, s in held if s.port})
            extra = f" (the job listens on {', '.join(map(str, others))})" if others else (
                " (the job listens on no TCP port at all)")
            yield Finding("listen.missing", Severity.CRITICAL,
                          f"The server is not listening on its port {port}: --port says {port}, "
                          f"but no process of the job holds it{extra}. Startup never finished.",
                          {"port": port, "launcher": launcher, "listening": others})
    elif held:
        ports = sorted({s.port for _, s in held if s.port})
        yield Finding("listen.ports", Severity.INFO,
                      f"The job listens on TCP port(s) {', '.join(map(str, ports))}.",
                      {"ports": ports})


def check_process_states(snap: Snapshot) -> Iterable[Finding]:
    """Zombies, stopped and uninterruptible processes."""
    for proc in snap.processes:
        who = f"{proc.name} (PID {proc.pid})"
        if proc.state == "Z":
            yield Finding("proc.zombie", Severity.CRITICAL,
                          f"{who} has exited and is a zombie (<defunct>): its parent has not "
                          "reaped it, and any collective that needs it will never finish.",
                          {"pid": proc.pid, "ppid": proc.ppid})
        elif proc.state in ("T", "t"):
            yield Finding("proc.stopped", Severity.CRITICAL,
                          f"{who} is stopped (state T: SIGSTOP or a debugger). hangscope leaves "
                          f"it as it is; `kill -CONT {proc.pid}` resumes it.", {"pid": proc.pid})
        elif proc.state == "D":
            working = proc.working_thread
            yield Finding("proc.uninterruptible", Severity.WARNING,
                          f"{who} is in uninterruptible sleep (state D) in "
                          f"{(working.wchan if working else None) or 'the kernel'}: storage or "
                          "a driver is not answering.",
                          {"pid": proc.pid, "kernel_stack": list(proc.kernel_stack[:8])})


def check_cpu_idle(snap: Snapshot) -> Iterable[Finding]:
    """Every rank idle on CPU for the whole window."""
    ranks = _ranks(snap) or [p for p in snap.processes if p.threads]
    cpus = [p.cpu_percent for p in ranks if p.cpu_percent is not None]
    if not cpus or len(cpus) < len(ranks) or snap.window_s <= 0:
        return
    noun = "rank" if _ranks(snap) else "process"
    if max(cpus) < 5.0:
        yield Finding("activity.idle", Severity.WARNING,
                      f"Every {noun} was idle on CPU for the whole {snap.window_s:.1f} s window "
                      f"(highest {max(cpus):.0f}%): nothing is computing, everything waits.",
                      {"cpu_percent": {rank_id(p): p.cpu_percent for p in ranks}})
    busy = [p for p in ranks if (p.cpu_percent or 0) >= 50.0]
    if busy and len(busy) < len(ranks):
        yield Finding("activity.busy", Severity.INFO,
                      f"{'Rank' if len(busy) == 1 else 'Ranks'} "
                      f"{compact_ranks(rank_id(p) for p in busy)} used CPU during the window "
                      "while the others were idle.",
                      {"cpu_percent": {rank_id(p): p.cpu_percent for p in busy}})


def check_gpu_activity(snap: Snapshot) -> Iterable[Finding]:
    """Each rank's GPU utilisation against its host thread (hangscope.analyze.gpu)."""
    from hangscope.analyze.gpu import gpu_findings

    return gpu_findings(snap)


CHECKS: tuple[Check, ...] = (
    check_expected_ranks,
    check_listening,
    check_process_states,
    check_cpu_idle,
    check_gpu_activity,
)


def find_all(snap: Snapshot) -> tuple[Finding, ...]:
    """Run every check, drop what repeats the verdict, most severe first."""
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(snap))
    if snap.verdict is not None and snap.verdict.kind is VerdictKind.MISSING_RANK:
        # The verdict already says how many ranks are missing.
        findings = [f for f in findings if f.id != "ranks.missing"]
    findings.sort(key=lambda f: f.severity.order)
    return tuple(findings)
