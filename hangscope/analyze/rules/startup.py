"""A server that never finished starting, or never finished stopping.

A server that never finished starting: it logged its framework's "startup begins" line and
never the "startup complete" one, nothing listens on the port it was given, and its event loop
idles in the framework's serve loop while no process of the job works.

uvicorn runs the app's lifespan up to its ``yield`` before it binds its socket; a lifespan that
awaits something that never completes (a consumer loop awaited instead of started as a task,
a connection that never comes) leaves the server up, its loop woken now and then by whatever
else it does, and nothing served (uvicorn#2751, #237: the log stops at "Waiting for
application startup."). The coroutine that waits is suspended, on no thread's stack; the
framework's own log and the kernel's listening sockets say where the startup stands. A server
still loading (CPU, or another process of the job working, which the startup may await) is
not this.

A server that never finished stopping: it logged its framework's "waiting for connections to
close" line and not the one it logs as it ends; its listener is closed, its loop idles, and it
still holds connections: its graceful shutdown waits for their responses to end, and a
response that never ends (a stream of server-sent events a dashboard keeps reading) keeps it
alive for ever (uvicorn#451). Whoever waits for it to exit (a supervisor rolling it) waits
with it.
"""

from __future__ import annotations

from collections.abc import Callable

from hangscope.analyze.evidence.facts import BUSY, Facts
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.frameworks import FRAMEWORKS, Framework
from hangscope.model import Process, Severity, Verdict, VerdictKind
from hangscope.words import who

#: A process at or above this CPU share works (loads weights, computes): not stuck in startup.
WORKING_CPU_PERCENT = 20.0


def startup_pending(facts: Facts) -> Verdict | None:
    snap = facts.snapshot
    port = snap.job.args.get("--port")
    listening = {s.port for p in snap.processes for s in p.listening if s.port}
    if port is not None and (not port.isdigit() or int(port) in listening):
        return None  # it serves (or the port is no number to look for)
    live = [p for p in snap.processes if not p.is_exited]
    for proc in live:
        found = _starting(proc)
        if found is None or (port is None and any(s.port for s in proc.listening)):
            continue
        if any(_works(p) for p in live):
            return None  # what the startup awaits may be that work (an engine loading)
        framework, (begun, done) = found
        where = f"port {port}" if port is not None else "any TCP port"
        summary = (
            f"Startup never finished: {who(proc)} logged \"{begun}\" and never "
            f"\"{done}\"; its event "
            f"loop idles in {framework.name}'s serve loop and nothing listens on {where}, so "
            f"the server accepts no request. {framework.name} runs the application's startup "
            "(its lifespan, up to the `yield`) before it binds its socket: that startup awaits "
            "something that does not complete (a loop or consumer awaited instead of started "
            "with asyncio.create_task, a connection or a peer that never comes). The awaiting "
            "coroutine is suspended, on no thread's stack: list it with asyncio.all_tasks() "
            "(aiomonitor, python -X dev), and start long-running work as a task before "
            "`yield`.")
        return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary, (proc.pid,),
                       evidence(facts), (proc.host,))
    return None


def _starting(proc: Process) -> tuple[Framework, tuple[str, str]] | None:
    """(its framework, its startup lines) where ``proc`` runs a framework's serve loop and the
    last of those lines in its log is the one that begins the startup."""
    return _between(proc, lambda framework: framework.startup_lines)


def _between(proc: Process, pair: Callable[[Framework], tuple[str, str] | None]
             ) -> tuple[Framework, tuple[str, str]] | None:
    """(its framework, the framework's ``pair`` of lines) where ``proc``'s working thread idles
    in that framework's serve loop and the last of those lines in its log is the first: a
    phase begun and not ended (a startup, a graceful shutdown)."""
    thread = proc.working_thread
    if thread is None or thread.category in BUSY:
        return None
    for framework in FRAMEWORKS:
        lines = pair(framework)
        if lines is None or not any(
                not f.native and any(part in (f.file or "") for part in
                                     framework.server_loop_files) for f in thread.frames):
            continue
        said = [text for text in proc.log_tail if lines[0] in text or lines[1] in text]
        if said and lines[0] in said[-1]:
            return framework, lines
    return None


def _works(proc: Process) -> bool:
    """It computes: on a CPU for a fair share of the window, or its working thread busy."""
    thread = proc.working_thread
    return ((proc.cpu_percent or 0.0) >= WORKING_CPU_PERCENT
            or (thread is not None and thread.category in BUSY))


def shutdown_pending(facts: Facts) -> Verdict | None:
    """A server in its framework's graceful shutdown that still holds open connections."""
    snap = facts.snapshot
    kernel = snap.waits.kernel if snap.waits is not None else None
    if kernel is None:
        return None
    for proc in snap.processes:
        found = _draining(proc) if not proc.is_exited and not proc.listening else None
        mine = kernel.process(proc.pid) if found is not None else None
        held = {r.inode for r in mine.fds if r.inode is not None} if mine is not None else set()
        open_ = [c for c in kernel.tcp if c.inode in held]
        if found is None or not open_:
            continue
        framework, (waiting, _done) = found
        peers = {other for pid, other, conn in kernel.tcp_pairs() if pid == proc.pid}
        by_pid = {p.pid: p for p in snap.processes}
        holders = [who(by_pid[p]) for p in sorted(peers) if p in by_pid]
        held_by = (f", to {', '.join(holders)}, which keeps {'them' if len(open_) > 1 else 'it'}"
                   " open" if holders else "")
        waiters = [e for e in (snap.wait_graph.edges if snap.wait_graph else ())
                   if e.kind == "child" and e.to_pid == proc.pid and e.pid in by_pid]
        behind = "".join(f"; {who(by_pid[e.pid])} waits for it to exit ({e.how})"
                         for e in waiters[:2])
        n = len(open_)
        summary = (
            f"Shutdown never finished: {who(proc)} logged \"{waiting}\" and has not ended: "
            f"{framework.name}'s graceful shutdown closed its listener and waits, with no "
            f"deadline, for its {n} open connection{'s' if n > 1 else ''}{held_by}{behind}. "
            "A response that never ends (a stream of server-sent events, a long poll) keeps "
            "the server alive: give the shutdown a deadline (uvicorn's "
            "--timeout-graceful-shutdown) or end streams when the server stops.")
        return Verdict(VerdictKind.WAIT_CHAIN, Severity.CRITICAL, summary, (proc.pid,),
                       evidence(facts), (proc.host,))
    return None


def _draining(proc: Process) -> tuple[Framework, tuple[str, str]] | None:
    """(its framework, its drain lines) where ``proc`` runs a framework's serve loop, idle,
    and the last of those lines in its log is the one that says it waits for connections."""
    return _between(proc, lambda framework: framework.drain_lines)
