"""Siblings running the same code, one behind the others: processes one parent started with
the same program (the same script or module, or the same ``python -c`` code), every one
blocked outside any collective, the job waiting on them, each in the same function of its own
code but not at the same line; one waits before a loop another is already inside
(``Frame.loops``, from the source): it has not got as far. What its siblings received before
that loop never reached it: a message published before it subscribed (ZMQ's PUB/SUB "slow
joiner": a PUB drops what it sends before a SUB connects), a reply routed to another process.

Pure, over analyze/graph/waitwalk.py's Graph. Collectives are compared by the collective rules;
this compares any other wait. Without loops to compare (no source), nothing is said: two
lines of one function alone do not say which one is behind.
"""

from __future__ import annotations

from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, site_words
from hangscope.model import Category, Frame, Process, Thread, in_library
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_COLLECTIVE = (Category.COLLECTIVE, Category.COMM_INIT)


def _program(proc: Process) -> tuple[str, ...] | None:
    """What the process runs: the interpreter and its script, module or ``-c`` code (the
    arguments after it, a rank or a path, may differ between siblings)."""
    argv = proc.cmdline
    if len(argv) >= 3 and argv[1] in ("-c", "-m"):
        return tuple(argv[:3])
    return tuple(argv[:2]) if len(argv) >= 2 else None


def _own(thread: Thread) -> Frame | None:
    """The innermost frame of the program's own code (a ``python -c`` program's is
    ``<string>``, which other readers take for a library's)."""
    return next((f for f in thread.frames if not f.native and f.line
                 and (f.file == "<string>" or not in_library(f.file))), None)


def _behind(here: Frame, there: Frame) -> tuple[int, int] | None:
    """The loop ``there`` is inside that ``here`` waits before (``here`` has not reached it)."""
    return next((span for span in there.loops
                 if span not in here.loops and (here.line or 0) < span[0]), None)


def behind_sibling(g: Graph) -> WaitPattern | None:
    groups: dict[tuple[int | None, tuple[str, ...]], list[tuple[Process, Thread, Frame]]] = {}
    for proc in g.live_working(outside=_COLLECTIVE):  # (no rank in a collective)
        thread = proc.working_thread
        assert thread is not None
        program = _program(proc)
        if program is None or not blocked(thread):
            continue
        own = _own(thread)
        if own is not None:
            groups.setdefault((proc.ppid, program), []).append((proc, thread, own))
    for members in groups.values():
        if len(members) < 2 or len({(f.file, f.name) for _, _, f in members}) != 1 \
                or len({f.line for _, _, f in members}) < 2:
            continue
        pids = {p.pid for p, _, _ in members}
        waited = [i for i, e in enumerate(g.edges) if e.to_pid in pids and e.pid not in pids]
        if not waited:
            continue  # nobody waits on them: workers idle between tasks
        late = [(m, span, other) for m in members for other in members if other is not m
                if (span := _behind(m[2], other[2])) is not None]
        if len({m[0].pid for m, _, _ in late}) != 1:
            continue  # none, or several behind: no single one out
        (proc, thread, own), span, (ahead, _, there) = late[0]
        waiters = list(dict.fromkeys(g.edges[i].pid for i in waited))
        waiting = "; ".join(f"{who(g.procs[pid])} waits on them"
                            f"{site_words(g.procs[pid].working_thread)}" for pid in waiters[:3])
        chain = (f"{who(proc)} waits at {own.name} ({own.location}), before the loop at lines "
                 f"{span[0]}-{span[1]} of its code that {who(ahead)}, started by the same "
                 f"parent with the same program, is already inside (at {there.location}): it "
                 "has not got as far as its sibling, so something its sibling received before "
                 "that loop never reached it (a message sent before it connected: a ZMQ PUB "
                 "drops what it publishes before a SUB joins, the 'slow joiner'; a reply "
                 f"routed to another process); {waiting}")
        return WaitPattern("behind_sibling", (proc.pid, *(p.pid for p, _, _ in members
                                                          if p.pid != proc.pid)),
                           chain, tuple(waited[:3]), proc.pid, thread.tid)
    return None
