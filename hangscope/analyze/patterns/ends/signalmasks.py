"""A signal that cannot end a wait: sent but blocked by every thread, or ignored.

A process whose threads all wait (an Event, a Condition, a pause) may be waiting for a signal:
its handler sets the flag, or its default action ends the process that a parent waits for.
The kernel says when that cannot happen, in /proc/PID/status:

- **Pending and blocked** (``ShdPnd`` against every thread's ``SigBlk``): the signal was sent
  and no thread will take it. ``signal.pthread_sigmask(SIG_BLOCK, ...)`` in the main thread
  before it starts the others (they inherit the mask) is the usual way: the handler never
  runs, and SIGTERM never ends it.
- **Ignored** (``SigIgn``): SIGTERM set to ``SIG_IGN`` (inherited through fork and exec, or
  set by a library) makes ``Popen.terminate()`` a no-op, and a parent that then waits for the
  child's exit waits for ever.

Read in analyze/patterns/waitpatterns.py's order, before the lost wake-ups: those are the same
waits,
without the fact that explains them.
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, hops_into, site_words, waits_into
from hangscope.analyze.patterns.ends.signalwaits import signal_wait as signal_call
from hangscope.model import Category, Process
from hangscope.model.waits import WaitPattern
from hangscope.words import verb, who


def _all_wait(proc: Process) -> bool:
    threads = [t for t in proc.threads if t.python] or list(proc.threads)
    return bool(threads) and all(
        blocked(t) and t.category not in (Category.RUNNING, Category.SPIN, Category.IO)
        for t in threads)


def _waits(proc: Process) -> str:
    """``; its thread MainThread waits on a lock at f (x.py:3)`` (``it`` alone when it has
    one Python thread)."""
    thread = proc.working_thread
    if thread is None or thread.category is None:
        return ""
    one = len([t for t in proc.threads if t.python]) <= 1
    name = "it" if one else f"its thread {thread.name or thread.tid}"
    if (call := signal_call(thread)) is not None:  # the wait is for that very signal
        return f"; {name} sleeps in {call}{site_words(thread)}, waiting for a signal"
    return f"; {name} {verb(thread.category, op=thread.op)}{site_words(thread)}"


def _parent_waits(g: Graph, proc: Process) -> list[int]:
    return [i for i, e in enumerate(g.edges) if e.kind == "child" and e.to_pid == proc.pid]


def signal_wait(g: Graph) -> WaitPattern | None:
    for proc in g.snap.processes:
        if not proc.signals_blocked and "SIGTERM" not in proc.signals_ignored:
            continue  # neither case below: no pending signal blocked, SIGTERM not ignored
        if proc.is_exited or proc.is_stopped or not _all_wait(proc):
            continue
        parents = _parent_waits(g, proc)
        if proc.signals_blocked:
            names = " and ".join(proc.signals_blocked)
            it = "it" if len(proc.signals_blocked) == 1 else "they"
            chain = (f"{who(proc)} has {names} pending, blocked by every one of its threads: "
                     f"{it} reached the process and no thread will take {it}, so its handler "
                     f"never runs and no default action ends it{_waits(proc)}. A signal mask "
                     "(signal.pthread_sigmask(SIG_BLOCK, ...), which threads started after it "
                     "inherit, as does a child started from a thread that blocked it: a mask "
                     "survives fork and exec) keeps it pending: unblock it where the process "
                     "waits (signal.pthread_sigmask(SIG_UNBLOCK, ...), in the child or in "
                     "Popen's preexec_fn), or take it with signal.sigwait()")
            alike = [p for p in g.snap.processes if p.pid != proc.pid and not p.is_exited
                     and p.signals_blocked == proc.signals_blocked and _all_wait(p)]
            if alike:
                chain += (f"; {', '.join(who(p) for p in alike[:4])}"
                          f"{f' and {len(alike) - 4} more' if len(alike) > 4 else ''} "
                          f"{'are' if len(alike) > 1 else 'is'} in the same state")
            kind = "signal_blocked"
        elif "SIGTERM" in proc.signals_ignored and parents:
            chain = (f"{who(proc)} ignores SIGTERM (SIG_IGN), and its parent waits for it to "
                     f"exit{_waits(proc)}. terminate() or kill PID does not end it: restore "
                     "the default (signal.signal(SIGTERM, SIG_DFL)) in the child, or stop it "
                     "another way (a message, a pipe it reads)")
            kind = "signal_ignored"
        else:
            continue
        others, into = waits_into(g, proc.pid)
        into = [*into, *(i for i in parents if i not in into)][:3]
        chain += hops_into(g, into)
        waiting = tuple(dict.fromkeys([*others, *(g.edges[i].pid for i in parents)]))
        return WaitPattern(kind, (proc.pid, *waiting), chain, tuple(into), proc.pid,
                           proc.working_tid)
    return None
