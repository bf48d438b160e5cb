"""The wait-for graph's crash loop: the children a process waits on die as they start, and
something starts them again (a ``multiprocessing.Pool`` replaces each dead worker; a
supervisor restarts its child), so the wait never ends and no process is stuck for long.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph). The evidence is that of a
process table in flux: at least two children of one live process exited while the dump
sampled them (py-spy found them gone), or one did and a sibling started after it lives (its
replacement), the log repeats one error line at least three times,
and its last traceback names where in the program's own code they die (a Pool's
``initializer``: cpython#87472, a Pool does not stop when its initializer raises).
"""

from __future__ import annotations

import os

from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, site_words
from hangscope.analyze.patterns.ends.deadthreads import last_traceback
from hangscope.analyze.patterns.poolpatterns import pool_runs
from hangscope.model import Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

#: Children that exited during one dump: one may end its work; two or more die as they start
#: (or one, replaced by a younger sibling).
_DIED = 2
#: How often the log must repeat the error line for the deaths to be one cause, again and again.
_REPEATS = 3


def _replaced(kids: list[Process]) -> bool:
    """A child that exited during the dump has a live sibling started after it: its
    replacement (a supervisor with one replica loses only one child per dump)."""
    gone = [k.create_time for k in kids if k.is_gone and k.create_time is not None]
    return bool(gone) and any(not k.is_exited and k.create_time is not None
                              and k.create_time > min(gone) for k in kids)


#: A child started this long after its parent is a replacement, not one of the first.
_LATE_S = 1.0


def _restarted(proc: Process, kids: list[Process]) -> bool:
    """Every child the dump found started well after its parent: all are replacements (a
    supervisor caught between two restarts may show a single child, which then dies)."""
    if proc.create_time is None:
        return False
    return bool(kids) and all(k.create_time is not None and k.create_time > proc.create_time
                              + _LATE_S for k in kids)


def _waiting(thread: Thread) -> bool:
    """The thread waits: its stack never moved, or it sleeps in the kernel now. A supervisor
    in a crash loop wakes at each death to start the replacement, so its samples may differ
    (os.wait, then Popen, then os.wait again); where it returns to is the wait."""
    return blocked(thread) or thread.state in ("S", "D")


def crash_loop(g: Graph) -> WaitPattern | None:
    # Only a parent with a child gone can be in a crash loop: a set, not a look per rank.
    parents = {p.ppid for p in g.exited if p.is_gone}  # (gone: exited, reaped)
    for proc in g.snap.processes if parents else ():
        if proc.pid not in parents:
            continue
        thread = proc.working_thread
        if proc.is_exited or thread is None or not _waiting(thread):
            continue
        kids = g.kids(proc.pid)
        dead = sorted(p.pid for p in kids if p.is_gone)
        if not dead or (len(dead) < _DIED and not _replaced(kids) and not _restarted(proc, kids)):
            continue
        found = last_traceback(proc.log_tail, innermost=True)
        if found is None:
            continue
        (path, line, func), error = found
        repeats = sum(1 for e in proc.log_errors if e.strip() == error)
        if repeats < _REPEATS:
            continue
        pool = pool_runs(proc, "_handle_workers")  # the thread that replaces dead workers
        again = ("its multiprocessing Pool replaces each dead worker, which dies the same way "
                 "(a Pool does not stop when its initializer fails)" if pool else
                 "each is started again and dies the same way")
        many = len(dead) > 1
        chain = (f"{len(dead)} {'children' if many else 'child'} of {who(proc)} exited while "
                 f"this dump sampled {'them' if many else 'it'} (PID{'s' if many else ''} "
                 f"{', '.join(map(str, dead[:6]))}), and the log repeats "
                 f"{error!r} {repeats} times, raised in {func} "
                 f"({os.path.basename(path)}:{line}); {again}, so {who(proc)} waits"
                 f"{site_words(thread)} for ever; fix the error, and fail fast when a worker "
                 "cannot start")
        return WaitPattern("crash_loop", (proc.pid, *dead), chain, (), dead[0], None,
                           tuple(dead[1:]))
    return None
