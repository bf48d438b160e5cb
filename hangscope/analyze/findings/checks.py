"""Findings: the checks an engineer runs by hand, each a sentence with its evidence.

Pure functions over a Snapshot: no I/O and no clock (ages are measured against
``Snapshot.created``). Each check returns zero or more Findings; ``find_all`` orders them by
severity and drops any that would only repeat the verdict. docs/findings.md lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime

from hangscope.analyze.evidence.facts import sampled_and_moved
from hangscope.analyze.evidence.world import finished_ranks
from hangscope.analyze.findings.census import census_of, cpu_of, release_census
from hangscope.analyze.findings.cuda import check_coredump_pipe
from hangscope.analyze.findings.kernel import (
    SHOWN_LINES,
    check_kernel_messages,
    check_memory,
    check_process_states,
)
from hangscope.analyze.findings.loop import check_loop_unsafe_calls
from hangscope.model import (
    Finding,
    Process,
    ProcessKey,
    Role,
    Severity,
    Snapshot,
    VerdictKind,
    rank_id,
)
from hangscope.words import compact_ranks, duration, program, who, who_many

Check = Callable[[Snapshot], Iterable[Finding]]

#: A rank below this CPU percentage over the window is idle.
IDLE_CPU_PERCENT = 5.0
#: A compiler running this long is slow enough to be the reason a rank seems hung.
COMPILER_SLOW_S = 60.0


# -- words ---------------------------------------------------------------------------

def _created(snap: Snapshot) -> float | None:
    """When the snapshot was taken, seconds since the epoch."""
    try:
        return datetime.fromisoformat(snap.created).timestamp()
    except (TypeError, ValueError):
        return None


def _by_pid(snap: Snapshot) -> dict[ProcessKey, Process]:
    """Processes by (host, PID): a parent is on its child's host (PIDs repeat across nodes)."""
    return {p.key: p for p in snap.processes}


def _parent_chain(by_pid: dict[ProcessKey, Process], proc: Process) -> Iterable[Process]:
    seen = {proc.pid}
    current = by_pid.get((proc.host, proc.ppid)) if proc.ppid is not None else None
    while current is not None and current.pid not in seen:
        yield current
        seen.add(current.pid)
        current = by_pid.get((current.host, current.ppid)) if current.ppid is not None else None


def _rank_of(by_pid: dict[ProcessKey, Process], proc: Process) -> Process | None:
    """The rank (or launcher) a helper process runs under."""
    chain = list(_parent_chain(by_pid, proc))
    for parent in chain:
        if parent.role in (Role.RANK, Role.ENGINE_CORE):
            return parent
    return chain[0] if chain else None


# -- ranks -----------------------------------------------------------------------------

def _rank_noun(snap: Snapshot) -> str:
    """What a rank is called in this kind of job, with ``TP`` when only --tp-size sized it."""
    noun = {"sglang": "schedulers", "vllm": "workers"}.get(snap.job.kind, "ranks")
    source = snap.job.expected_source or ""
    flags = [w for w in source.split() if w.startswith("-")]
    if flags and all(f in ("--tp-size", "--tp", "--tensor-parallel-size", "-tp",
                           "--tensor-model-parallel-size") for f in flags):
        return f"TP {noun}"
    return noun


def check_expected_ranks(snap: Snapshot) -> Iterable[Finding]:
    """``--tp-size 8`` should mean 8 ranks: say how many exist."""
    expected = snap.job.expected_ranks
    if expected is None:
        return
    ranks = snap.rank_processes
    found = len(ranks)
    noun = _rank_noun(snap)
    source = snap.job.expected_source
    facts = {"expected": expected, "found": found, "source": source,
             "pids": [p.pid for p in ranks]}
    if found < expected <= found + len(done := finished_ranks(snap.processes)):
        yield Finding("ranks.finished", Severity.INFO, f"Expected {expected} {noun} ({source}) "
                      f"and found {found} running: the other {expected - found} exited with "
                      "code 0 (finished).", {**facts, "finished": [p.pid for p in done]})
    elif found < expected:
        missing = expected - found
        yield Finding("ranks.missing", Severity.CRITICAL,
                      f"Expected {expected} {noun} ({source}) but found "
                      f"{found or 'none'}: {missing} never started or already exited.", facts)
    elif found > expected:
        yield Finding("ranks.extra", Severity.WARNING,
                      f"Found {found} {noun} but {source} asks for {expected}: hangscope may "
                      "have read the size wrong, or processes of another job joined this one.",
                      facts)
    else:
        yield Finding("ranks.count", Severity.INFO,
                      f"Expected {expected} {noun} ({source}) and found all {found}.", facts)


# -- listening sockets ----------------------------------------------------------------

def check_listening(snap: Snapshot) -> Iterable[Finding]:
    """The server's ``--port``: is anyone in the job listening on it?"""
    port_text = snap.job.args.get("--port")
    held = census_of(snap).listening
    tcp = [(p, s) for p, s in held if s.kind != "unix" and s.port]
    listed = [{"pid": p.pid, "kind": s.kind, "address": s.address, "port": s.port}
              for p, s in held]
    if port_text and port_text.isdigit():
        port = int(port_text)
        owners = [p for p, s in tcp if s.port == port]
        if owners:
            yield Finding("listen.ok", Severity.INFO,
                          f"Port {port} (--port) is open, held by {who(owners[0])}.",
                          {"port": port, "pids": sorted({p.pid for p in owners}),
                           "listening": listed})
            return
        others = sorted({s.port for _, s in tcp if s.port})
        elsewhere = any(port in h.listening_ports for h in snap.hosts)
        if elsewhere:
            why = (f"another process on this machine, outside the job, already listens on "
                   f"port {port}: the server could not bind it (address already in use)")
        elif others:
            why = (f"the job listens only on other ports ({', '.join(map(str, others[:6]))}: "
                   "its rendezvous and internal ones), so the server has not finished "
                   "starting up")
        else:
            why = "the job listens on no TCP port at all: the server never finished starting up"
        yield Finding("listen.missing", Severity.CRITICAL,
                      f"The server is not listening on its port {port} (--port {port}): "
                      f"no process of the job holds it; {why}.",
                      {"port": port, "launcher": snap.job.launcher, "listening": listed,
                       "taken_by_another_process": elsewhere})
    elif tcp and snap.verdict is not None and snap.verdict.kind is VerdictKind.IDLE:
        # Only where it bears on the verdict: an idle server's ports say where to send it a
        # request; a training job's (its store, gloo's pairs) said on every report are noise.
        ports = sorted({s.port for _, s in tcp if s.port})
        owners = sorted({p.pid for p, _ in tcp})
        yield Finding("listen.ports", Severity.INFO,
                      f"The job listens on TCP port{'s' if len(ports) > 1 else ''} "
                      f"{', '.join(map(str, ports))} (PID{'s' if len(owners) > 1 else ''} "
                      f"{', '.join(map(str, owners))}).",
                      {"ports": ports, "listening": listed})


# -- activity --------------------------------------------------------------------------

def check_cpu_idle(snap: Snapshot) -> Iterable[Finding]:
    """Every rank idle on CPU for the whole window; or a few ranks busy while others idle."""
    rank_procs = snap.rank_processes
    ranks = rank_procs or [p for p in snap.processes if p.threads]
    top, busy = cpu_of(ranks, 50.0)
    if top is None or snap.window_s <= 0:
        return
    noun = "rank" if rank_procs else "process"
    if top < IDLE_CPU_PERCENT:
        per = {rank_id(p): p.cpu_percent for p in ranks}
        # An idle or paused job is meant to use no CPU: a fact, no warning.
        calm = snap.verdict is not None and snap.verdict.kind in (VerdictKind.IDLE,
                                                                  VerdictKind.PAUSED)
        yield Finding("activity.idle", Severity.INFO if calm else Severity.WARNING,
                      f"Every {noun} was idle on CPU for the whole {snap.window_s:.1f} s "
                      f"window (the busiest used {top:.0f}%): none is computing; they "
                      + (f"all wait, as a job that is {snap.verdict.kind} does."  # type: ignore[union-attr]
                         if calm else "all wait."),
                      {"cpu_percent": per, "window_s": snap.window_s})
    if busy and len(busy) < len(ranks):
        numbers = compact_ranks(rank_id(p) for p in busy)
        if noun == "process":  # no rank numbers: a PID is not a rank ("Rank 1792")
            who = who_many(busy)
            who = who[:1].upper() + who[1:]
        else:
            who = (f"{'Rank' if len(busy) == 1 else 'Ranks'} {numbers}" if len(numbers) <= 40
                   else f"{len(busy)} ranks")
        yield Finding("activity.busy", Severity.INFO,
                      f"{who} used CPU during the window while the others were idle.",
                      {"cpu_percent": {rank_id(p): p.cpu_percent for p in busy},
                       "pids": [p.pid for p in busy]})


def check_gpu_activity(snap: Snapshot) -> Iterable[Finding]:
    """Each rank's GPU utilisation against its host thread (hangscope.analyze.evidence.gpu)."""
    from hangscope.analyze.evidence.gpu import gpu_findings

    return gpu_findings(snap)


# -- compilers ---------------------------------------------------------------------------

def check_compilers(snap: Snapshot) -> Iterable[Finding]:
    """``ptxas``/``nvcc``/``cicc`` under a rank, and busy Inductor compile workers: how long."""
    now = _created(snap)

    def age(proc: Process) -> float | None:
        # (a compiler started during the dump, after its stamp, or within the start time's
        # tick of it: no negative age)
        return max(0.0, now - proc.create_time) if now is not None and proc.create_time \
            else None

    found = census_of(snap)  # live compilers, busy compile workers
    compilers, workers = found.compilers, found.workers
    if not compilers and not workers:
        return
    by_pid = _by_pid(snap)
    for proc in sorted(compilers, key=lambda p: -(age(p) or 0))[:5]:
        owner = _rank_of(by_pid, proc)
        seconds = age(proc)
        running = f" for {duration(seconds)}" if seconds is not None else ""
        under = f" under {who(owner)}" if owner is not None else ""
        idle = proc.cpu_percent is not None and proc.cpu_percent < IDLE_CPU_PERCENT
        slow = seconds is not None and seconds >= COMPILER_SLOW_S
        yield Finding("compile.running", Severity.WARNING if slow else Severity.INFO,
                      f"The compiler {who(proc)} has been running{running}{under}: the rank "
                      "waits for a "
                      "GPU kernel to compile"
                      + (", which is slow enough to look like a hang" if slow else "")
                      + (f" (the compiler itself used {proc.cpu_percent:.0f}% CPU in the "
                         "window: it may be stuck too)." if idle else "."),
                      {"pid": proc.pid, "program": program(proc), "age_s": seconds,
                       "rank_pid": owner.pid if owner else None,
                       "cpu_percent": proc.cpu_percent})
    if len(compilers) > 5:
        yield Finding("compile.running", Severity.INFO,
                      f"{len(compilers) - 5} more compiler processes are running.",
                      {"pids": [p.pid for p in compilers]})
    by_owner: dict[ProcessKey | None, list[Process]] = {}
    for proc in workers:
        owner = _rank_of(by_pid, proc)
        by_owner.setdefault(owner.key if owner else None, []).append(proc)
    for owner_key, procs in by_owner.items():
        owner = by_pid.get(owner_key) if owner_key is not None else None
        owner_pid = owner.pid if owner is not None else None
        oldest = max((age(p) or 0 for p in procs), default=0)
        cpus = ", ".join(f"{p.cpu_percent:.0f}%" for p in procs[:6])
        yield Finding("compile.workers", Severity.INFO,
                      f"{len(procs)} Inductor compile worker{'s are' if len(procs) > 1 else ' is'}"
                      f" busy{' under ' + who(owner) if owner else ''} (CPU {cpus})"
                      + (f", the pool started {duration(oldest)} ago" if oldest else "")
                      + ": torch.compile is compiling.",
                      {"pids": [p.pid for p in procs], "rank_pid": owner_pid})


# -- log files ---------------------------------------------------------------------------

def _quote(line: str) -> str:
    return "“" + line.strip() + "”"


def check_logs(snap: Snapshot) -> Iterable[Finding]:
    """The tail and the error lines of each log file a rank writes to (its fd 1/2)."""
    now = _created(snap)
    by_files: dict[tuple[str, ...], list[Process]] = {}
    for proc in snap.processes:
        if proc.log_files and (proc.log_tail or proc.log_errors):
            by_files.setdefault(proc.log_files, []).append(proc)
    for files, procs in by_files.items():
        rep = max(procs, key=lambda p: (len(p.log_errors), len(p.log_tail)))
        name = " and ".join(files)
        when = ""
        if now is not None and rep.log_modified is not None:
            when = f", last written {duration(now - rep.log_modified)} before this dump"
        facts: dict[str, object] = {"files": list(files), "pids": [p.pid for p in procs],
                                    "errors": list(rep.log_errors), "tail": list(rep.log_tail),
                                    "modified": rep.log_modified}
        writer = who_many(procs)
        if rep.log_errors:
            count = len(rep.log_errors)
            yield Finding("log.errors", Severity.WARNING,
                          f"{writer} logged {count} error line{'s' if count > 1 else ''} to "
                          f"{name}{when}; the last: {_quote(rep.log_errors[-1])}.",
                          {**facts, "lines": list(rep.log_errors[-SHOWN_LINES:])})
        else:
            last = [line for line in rep.log_tail if not line.startswith("==> ")]
            if not last:
                continue
            yield Finding("log.tail", Severity.INFO,
                          f"{writer} write{'s' if len(procs) == 1 else ''} to {name}{when}; "
                          f"the last line: {_quote(last[-1])}.",
                          {**facts, "lines": list(rep.log_tail[-3:])})


# -- ages --------------------------------------------------------------------------------

def check_ages(snap: Snapshot) -> Iterable[Finding]:
    """How old the job is, and whether any rank's stack changed during the window."""
    now = _created(snap)
    first = census_of(snap).first_started  # the first of the oldest with a create time
    if now is not None and first is not None:
        # "its launcher, PID 10"; "rank 0, PID 12"; a plain process is named by its PID once.
        what = ("its launcher" if first.role is Role.LAUNCHER else who(first)).split(" (")[0]
        named = what if what == f"PID {first.pid}" else f"{what}, PID {first.pid}"
        seconds = max(0.0, now - (first.create_time or now))  # (started during the dump)
        yield Finding("age.job", Severity.INFO,
                      f"The job started {duration(seconds)} before this dump ({named}).",
                      {"age_s": round(seconds, 1), "pid": first.pid})
    if snap.samples < 2:
        return
    sampled, moved = sampled_and_moved(snap.subjects)
    if not sampled:
        return
    is_rank = any(p.rank is not None for p in sampled)
    noun = "rank" if is_rank else "process"
    facts = {"window_s": snap.window_s, "samples": snap.samples,
             "moved": [p.pid for p in moved]}
    window = f"the {snap.window_s:.1f} s window ({snap.samples} samples)"
    calm = snap.verdict is not None and snap.verdict.kind in (VerdictKind.IDLE,
                                                               VerdictKind.PAUSED)
    if not moved:
        yield Finding("age.stacks", Severity.INFO,
                      f"No {noun}'s stack changed during {window}: " + (
                          f"the job is {snap.verdict.kind}, not slow." if calm  # type: ignore[union-attr]
                          else "they are stuck, not slow."),
                      facts)
    elif len(moved) < len(sampled):
        moved_pids = {p.pid for p in moved}
        still = [p for p in sampled if p.pid not in moved_pids]
        yield Finding("age.stacks", Severity.INFO,
                      f"{who_many(moved)} changed stack during {window}; {who_many(still)} "
                      "did not.", facts)


CHECKS: tuple[Check, ...] = (
    check_expected_ranks,
    check_listening,
    check_process_states,
    check_kernel_messages,
    check_cpu_idle,
    check_gpu_activity,
    check_compilers,
    check_memory,
    check_logs,
    check_ages,
    check_coredump_pipe,
    check_loop_unsafe_calls,
)


def _repeats_verdict(finding: Finding, snap: Snapshot) -> bool:
    """Whether a finding only says what the verdict already says."""
    verdict = snap.verdict
    if verdict is None:
        return False
    if finding.message in verdict.summary:
        return True
    pid = finding.evidence.get("pid")
    if verdict.kind is VerdictKind.MISSING_RANK:
        if finding.id == "ranks.missing":
            return True  # the verdict says how many ranks are missing
        if finding.id in ("proc.zombie", "proc.exited") and pid in verdict.suspects:
            # Said by the verdict, unless the finding adds how it exited.
            return finding.evidence.get("exit_code") is None
    if verdict.kind is VerdictKind.STRAGGLER and finding.id == "activity.busy":
        pids = finding.evidence.get("pids")
        return isinstance(pids, list) and set(pids) <= set(verdict.suspects)
    return verdict.kind is VerdictKind.PROGRESSING and finding.id == "age.stacks"


def find_all(snap: Snapshot) -> tuple[Finding, ...]:
    """Run every check, drop what repeats the verdict, most severe first (stable)."""
    findings: list[Finding] = []
    try:
        for check in CHECKS:
            findings.extend(check(snap))
    finally:
        release_census()  # held on, it would keep the job's processes alive
    findings = [_capitalized(f) for f in findings if not _repeats_verdict(f, snap)]
    findings.sort(key=lambda f: f.severity.order)
    return tuple(findings)


def _capitalized(finding: Finding) -> Finding:
    """A sentence starts with a capital: ``Rank 3 (PID 12) ...``, ``The launcher ...``."""
    message = finding.message
    if message.startswith(("rank ", "ranks ", "the ")):
        return replace(finding, message=message[0].upper() + message[1:])
    return finding
