"""Whom the live pipeline asks for ``py-spy dump --locals``, and what their locals say.

Pure: the sampler calls these with the merged (unclassified) processes; collect/waits.py only
runs py-spy for the PIDs named here and hands the JSON back to :func:`interpret`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hangscope.analyze.classify import classify_process
from hangscope.analyze.locks import filelock_path, polls_filelock
from hangscope.analyze.p2p import in_p2p, p2p_call_of_thread
from hangscope.model import Process
from hangscope.model.waits import LocalsRead


def wants_locals(proc: Process) -> bool:
    """Its working thread polls a filelock or waits in a point-to-point op."""
    # Never a process in D: a ptrace attach to it may wait for the kernel (live/sampler.py).
    return not proc.is_exited and proc.state != "D" and (polls_filelock(proc) or in_p2p(proc))


def locals_wanted(procs: Sequence[Process]) -> tuple[tuple[int, ...], dict[int, int | None]]:
    """(PIDs to ask, PID -> the working thread whose locals matter)."""
    # Classified here (pure, ~µs a process) for the working thread; analyze() does it again.
    asked = [c for p in procs if wants_locals(c := classify_process(p))]
    return tuple(p.pid for p in asked), {p.pid: p.working_tid for p in asked}


def interpreter(tids: dict[int, int | None]) -> Callable[[int, Sequence[object]], LocalsRead]:
    """What a process's ``--locals`` say about the thread ``tids`` names."""
    def interpret(pid: int, threads: Sequence[object]) -> LocalsRead:
        tid = tids.get(pid)
        return LocalsRead(pid, lock_file=filelock_path(threads, tid),
                          p2p=p2p_call_of_thread(threads, tid))
    return interpret
