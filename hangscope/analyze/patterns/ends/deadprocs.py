"""A process of the job died and the others wait on: a zombie the rest poll for or depend on
(read in analyze/patterns/waitpatterns.py's order, after the dead threads).

Two facts tie the dead process to the waiters, and either is enough with the job stuck:
- the job's log ends with the traceback of the function that process ran (a multiprocessing
  target that raised: ``ValueError`` in ``publisher``), and it exited non-zero;
- the waiters' log names its PID ("retiring weight server 5312"): they wait on that process.
A zombie also explains why a poll never ends: ``kill(pid, 0)`` and ``/proc/PID`` still
succeed on it until its parent reaps it, and a parent that waits for another child never does.
"""

from __future__ import annotations

import os

from hangscope.analyze.graph.liveness import job_computes, stuck_poller
from hangscope.analyze.graph.threadedges import blocked
from hangscope.analyze.graph.waitwalk import Graph, site_words
from hangscope.analyze.patterns.ends.deadthreads import last_traceback
from hangscope.model import Category, Process
from hangscope.model.waits import WaitPattern
from hangscope.words import exit_text, who, who_list


def _waiters(g: Graph) -> list[Process]:
    return [p for p in g.snap.processes if not p.is_exited and stuck_poller(g, p)]


def _semlock(proc: Process) -> bool:
    """Its working thread waits for a multiprocessing lock (a SemLock its siblings share)."""
    thread = proc.working_thread
    python = [f for f in thread.frames if not f.native][:2] if thread is not None else []
    return thread is not None and blocked(thread) and any(
        (f.file or "").endswith("multiprocessing/synchronize.py") for f in python)


def dead_process(g: Graph) -> WaitPattern | None:
    dead = [p for p in g.exited if p.state == "Z"]  # (a zombie has exited)
    if not dead:
        return None
    locked = [p for p in g.snap.processes if not p.is_exited and _semlock(p)]
    if locked and not job_computes(g.snap):
        found = _lock_holder_died(g, dead, locked)
        if found is not None:
            return found
    waiters = _waiters(g)
    if not waiters:
        return None
    lines = next((p.log_tail for p in waiters if p.log_tail), ())
    for proc in dead:
        named = next((line.strip() for w in waiters for line in reversed(w.log_tail[-8:])
                      if str(proc.pid) in line), None)
        raised = last_traceback(lines, innermost=True) if proc.exit_code not in (None, 0) \
            else None
        if named is None and raised is None:
            continue
        parent = g.procs.get(proc.ppid or 0)
        code = f" with code {proc.exit_code}" if proc.exit_code is not None else ""
        chain = f"{who(proc)} exited{code} and is a zombie"
        if raised is not None:
            (path, line, func), error = raised
            chain += (f": it died of {error!r}, raised in {func} "
                      f"({os.path.basename(path)}:{line}) (the log's last traceback)")
        names = who_list(waiters)
        thread = waiters[0].working_thread
        where = site_words(thread) if thread is not None else ""
        chain += (f"; {names} {'polls' if len(waiters) == 1 else 'poll'}{where}, waiting on "
                  "what it would have done")
        if named is not None:
            chain += f" (the log names PID {proc.pid}: {named[-120:]!r})"
            if parent is not None and not parent.is_exited:
                chain += (f"; its parent, {who(parent)}, never reaps it, and a zombie still "
                          "answers kill(pid, 0) and keeps /proc/PID: a poll of whether it "
                          "lives never sees it die")
        chain += ("; wait for the process itself (Popen.wait, a pidfd, its sentinel) and "
                  "handle its exit, or restart it")
        return WaitPattern("dead_process", (proc.pid, *(w.pid for w in waiters)), chain, (),
                           proc.pid, None)
    return None


def _lock_holder_died(g: Graph, dead: list[Process], locked: list[Process]
                      ) -> WaitPattern | None:
    """Siblings wait for a multiprocessing lock, and one of their siblings exited non-zero:
    the lock's holder most likely (a SemLock dies with nobody to release it)."""
    parents = {p.ppid for p in locked}
    died = next((d for d in dead if d.ppid in parents and d.exit_code not in (None, 0)), None)
    if died is None:
        return None
    same = [p for p in locked if p.ppid == died.ppid]
    thread = same[0].working_thread
    where = site_words(thread) if thread is not None else ""
    names = who_list(same)
    last = next((e.strip() for p in same for e in reversed(p.log_errors or p.log_tail)), None)
    chain = (f"{who(died)} exited with code {died.exit_code} and is a zombie; {names} "
             f"{'waits' if len(same) == 1 else 'wait'} for a multiprocessing lock{where} that "
             f"{'it shares' if len(same) == 1 else 'they share'} with it, a sibling: a "
             "process that dies holding such a lock never releases it, so it was most likely "
             "the holder")
    if last:
        chain += f" (the log's last error: {last[-140:]!r})"
    chain += ("; release the lock in a finally, watch the workers' sentinels, and rebuild the "
              "shared state when one dies")
    return WaitPattern("dead_holder", (died.pid, *(p.pid for p in same)), chain, (),
                       died.pid, None)


def crashed_child(g: Graph, pid: int | None) -> Process | None:
    """A child of ``pid`` (where a wait chain ends, blocked on nothing the graph can follow)
    that was killed by a signal (SIGABRT, SIGSEGV, SIGKILL: a crash, an OOM kill) and is a
    zombie it never reaped: what ``pid`` waits for would have come from it (a tokenizer
    manager awaiting the reply of a scheduler that aborted: sgl-project/sglang#18421).
    A child that exited by itself, or was reaped, says nothing here."""
    end = g.procs.get(pid or 0)
    if end is None or end.is_exited or g.live_edges(end.pid, None):
        return None
    thread = end.working_thread
    if thread is None or thread.category not in (Category.IPC_WAIT, Category.IDLE):
        return None
    return next((p for p in g.snap.processes if p.ppid == end.pid and p.state == "Z"
                 and p.exit_code is not None and p.exit_code < 0), None)


def crashed_words(g: Graph, proc: Process) -> str:
    """``; its child PID 7 was killed by SIGABRT (signal 6) ...``."""
    parent = g.procs.get(proc.ppid or 0)
    return (f"; its child {who(proc)} {exit_text(proc.exit_code or 0)} and is a zombie "
            f"{who(parent) if parent is not None else 'its parent'} never reaped: what it "
            "waits for would have come from that child; watch the children's sentinels "
            "(or a pidfd) and fail the requests, or restart the child, when one dies")
