"""A signal already gone: a process sleeps in ``signal.pause()`` (or ``sigsuspend``,
``sigwait``) for its child's SIGCHLD while that child has already exited and waits, a zombie,
to be reaped (read in analyze/patterns/waitpatterns.py's order, with the lost wake-ups).

Signals are not queued for a later ``pause()``: a SIGCHLD that came before the handler was
installed, or while the process was between its check and its ``pause()``, is gone, and
``pause()`` returns only on the next signal. The kernel facts say so: the thread's wait
channel is the pause (``__do_sys_pause``, ``sigsuspend``, ``do_sigtimedwait``) and its child
is in state Z (cpython's signal docs; the classic check-then-pause race).
"""

from __future__ import annotations

import functools

from hangscope.analyze.graph.threadedges import user_frame
from hangscope.analyze.graph.waitwalk import Graph, hop, waits_into
from hangscope.model import Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

#: Wait channels of a thread asleep until a signal comes.
_SIGNAL_WAITS = ("__do_sys_pause", "sys_pause", "do_sigsuspend", "sigsuspend",
                 "__se_sys_rt_sigsuspend", "do_sigtimedwait", "__do_sys_rt_sigsuspend")
#: What Python calls to get there.
_CALLS = {"__do_sys_pause": "signal.pause()", "sys_pause": "signal.pause()",
          "do_sigtimedwait": "signal.sigwait()"}


def signal_wait(thread: Thread) -> str | None:
    """The call a thread sleeps in until a signal comes (``signal.pause()``), or None."""
    return _signal_call(thread.state, thread.wchan) if thread.state == "S" else None


@functools.lru_cache(maxsize=1024)  # asked of every rank: once per distinct wait channel
def _signal_call(state: str | None, wchan: str | None) -> str | None:
    wchan = wchan or ""
    if state != "S" or not any(wchan == w or wchan.startswith(w + ".") for w in _SIGNAL_WAITS):
        return None
    return _CALLS.get(wchan.split(".")[0], "sigsuspend()")


def gone_signal(g: Graph) -> WaitPattern | None:
    # Only the parent of an exited process can have missed its SIGCHLD: a job without one
    # (most) is not walked rank by rank.
    parents = {p.ppid for p in g.exited if p.ppid is not None}
    for proc in g.snap.processes if parents else ():
        thread = proc.working_thread
        if proc.pid not in parents or proc.is_exited or thread is None or (
                call := signal_wait(thread)) is None:
            continue
        dead = [k for k in g.kids(proc.pid) if k.is_exited]
        if not dead:
            continue  # a pause with live children: their exit will still signal it
        inner = user_frame(thread)
        site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
        codes = ", ".join(f"{k.pid}" + (f" (exit code {k.exit_code})" if k.exit_code is not
                                        None else "") for k in dead[:4])
        many = len(dead) > 1
        chain = (f"{who(proc)} sleeps in {call}{site} until a signal comes, and its "
                 f"child{'ren' if many else ''} {codes} already exited: "
                 f"{'zombies' if many else 'a zombie'} it never reaped. The SIGCHLD that "
                 "would wake it came before it paused (before its handler was installed, or "
                 "between its check and the pause), and a signal is not kept for a later "
                 "pause(), so nothing will wake it; reap with os.waitpid() in a loop (or "
                 "wait with signal.sigtimedwait, a pidfd, or signal.set_wakeup_fd) instead "
                 "of pausing for the signal")
        waiters, into = waits_into(g, proc.pid)
        if into:
            chain = "; ".join(hop(g, i) for i in into) + "; " + chain
        return WaitPattern("lost_wakeup", (proc.pid, *waiters), chain, tuple(into), proc.pid,
                           thread.tid)
    return None
