"""A stale lock: processes poll for a lock that their own log says a process holds which no
longer exists (read in analyze/patterns/waitpatterns.py's order, with the orphaned waits).

A lock file (``O_CREAT|O_EXCL``, a PID file, a "lock" row) outlives a holder that crashed:
nothing releases it, and a poll loop without a staleness check sleeps and retries for ever,
which looks like a pause. The facts: the pollers' working threads sleep at one line and never
leave it over the window, the last lines of their log name the holder ("held by pid 4242"),
and the collector found no process with that PID at the dump (``Process.log_gone_pids``).
"""

from __future__ import annotations

import re

from hangscope.analyze.graph.liveness import stuck_poller
from hangscope.analyze.graph.waitwalk import Graph, site_words
from hangscope.model import Process
from hangscope.model.waits import WaitPattern
from hangscope.words import who_list

_LOCKISH = re.compile(r"lock|busy|held|owner|locked|in use", re.IGNORECASE)
_EXITED = re.compile(r"exit|died|killed|crash|signal|segfault|rc=-?\d", re.IGNORECASE)


def stale_holder(g: Graph) -> WaitPattern | None:
    by_pid: dict[int, list[tuple[Process, str]]] = {}
    for proc in g.snap.processes:
        if not proc.log_gone_pids or not stuck_poller(g, proc):
            continue
        for gone in proc.log_gone_pids:
            line = next((li for li in reversed(proc.log_tail) if str(gone) in li
                         and _LOCKISH.search(li)), None)
            if line is not None:
                by_pid.setdefault(gone, []).append((proc, line))
                break
    if not by_pid:
        return None
    gone, found = max(by_pid.items(), key=lambda kv: len(kv[1]))
    procs = [p for p, _ in found]
    first = procs[0]
    thread = first.working_thread
    where = site_words(thread) if thread is not None else ""
    them = who_list(procs)
    line = found[0][1].strip()
    chain = (f"{them} {'polls' if len(procs) == 1 else 'poll'}{where} for a lock that "
             f"{'its' if len(procs) == 1 else 'their'} log says PID {gone} holds "
             f"({line[-160:]!r}), and no process {gone} exists: its holder died without "
             "releasing it, so the lock is stale and the poll never ends")
    died = next((li.strip() for li in reversed(first.log_tail)
                 if _EXITED.search(li) and li.strip() != line), None)
    if died is not None:
        chain += f" (the log also says {died[-160:]!r})"
    chain += ("; remove the stale lock, and have the lock check that its holder is alive "
              "(or use fcntl.flock, which the kernel releases when its holder dies)")
    return WaitPattern("orphan_wait", tuple(p.pid for p in procs), chain, (), first.pid,
                       thread.tid if thread is not None else None,
                       tuple(p.pid for p in procs[1:]))
