"""A chain that ends at a stopped process: what stopped it, from the kernel's facts (read by
analyze/patterns/waitpatterns.py's sink, whose chain may then be only child waits: the stop says
why).

A process in state T runs no code until SIGCONT. Terminal job control is the stop nobody
sees: a process of a background process group that reads its terminal gets SIGTTIN (and one
that writes it, with ``stty tostop``, SIGTTOU), so a prompt in a child started in its own
process group (``Popen(process_group=0)``, ``start_new_session``, ``setpgid``) stops that
child instead of asking anyone. /proc/PID/stat says which: its process group is not its
terminal's foreground group (``tpgid``), and its stdin is that terminal.
"""

from __future__ import annotations

from hangscope.analyze.graph.waitwalk import Graph, hop, site_words
from hangscope.model import Process, Snapshot
from hangscope.words import who


def stopped_end(g: Graph, path: list[int]) -> Process | None:
    """The stopped process a chain ends at, if it does."""
    end = g.procs.get(g.edges[path[-1]].to_pid or 0) if path else None
    return end if end is not None and end.is_stopped and not end.is_exited else None


def _terminal(g: Graph, proc: Process) -> str | None:
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    fds = kernel.process(proc.pid) if kernel is not None else None
    return next((r.target for r in (fds.fds if fds is not None else ())
                 if r.fd == 0 and r.target.startswith(("/dev/pts/", "/dev/tty"))), None)


def stopped_words(g: Graph, proc: Process) -> str:
    """``; PID 9 (x) is stopped (state T) at f (y.py:3): <why>; kill -CONT 9 resumes it``."""
    thread = proc.working_thread
    where = site_words(thread) if thread is not None else ""
    tty = _terminal(g, proc)
    fg, mine = proc.terminal_pgrp, proc.pgrp
    tracer = g.procs.get(proc.tracer or 0)
    if proc.state == "t" and tracer is not None:
        why = (f"{who(tracer)}, its tracer (TracerPid), holds it in a ptrace stop, and "
               f"detaches only when it is done; `kill {tracer.pid}` ends the tracer, and its "
               "exit detaches it")
    elif proc.state == "t":
        why = "a debugger or tracer stopped it (state t: traced)"
    elif tty is not None and fg is not None and fg > 0 and mine is not None and mine != fg:
        why = (f"terminal job control stopped it: its stdin is the terminal {tty}, and its "
               f"process group {mine} is not that terminal's foreground group {fg}, so "
               "reading its terminal (a prompt: input(), readline on stdin) stops it with "
               "SIGTTIN, and nobody sees the prompt; run it in the foreground group (no "
               "process_group=0, start_new_session or setpgid), or give it "
               "stdin=subprocess.DEVNULL and a non-interactive flag (--yes)")
    else:
        why = ("a signal stopped it (SIGSTOP, or SIGTSTP from Ctrl-Z, or a tool that paused "
               "it and never sent SIGCONT)")
    return (f"; {who(proc)} is stopped (state {proc.state}){where}: {why}; `kill -CONT "
            f"{proc.pid}` resumes it")


def traced_words(snap: Snapshot, proc: Process) -> str | None:
    """``is held in a ptrace stop (state t) by PID 7 (sampler), its tracer; PID 7 is blocked
    writing pipe 5, which only rank 2 reads: ...``: a tracee whose tracer waits on it cannot
    be resumed by either (the tracer detaches only after its write)."""
    if proc.state != "t" or proc.tracer is None:
        return None
    tracer = next((p for p in snap.processes if p.pid == proc.tracer), None)
    them = who(tracer) if tracer is not None else f"PID {proc.tracer}"
    words = f"is held in a ptrace stop (state t) by {them}, its tracer"
    if tracer is None or snap.wait_graph is None:
        return words + f"; it resumes when {them} detaches or exits"
    g = Graph(snap, snap.wait_graph.edges)
    back = next((i for i in g.live_edges(tracer.pid, None)
                 if g.edges[i].to_pid == proc.pid), None)
    if back is None:
        return words + f"; it resumes when {them} detaches or exits"
    return (f"{words}, and {hop(g, back)}: each waits for the other, since the tracer "
            f"detaches only after that; `kill {tracer.pid}` ends the tracer, and its exit "
            "detaches the rank; let the tracer detach before it writes (or write to a file)")
