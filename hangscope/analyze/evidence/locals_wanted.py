"""Whom the live pipeline asks for ``py-spy dump --locals``, and what their locals say.

Pure: the sampler calls these with the merged (unclassified) processes; collect/waits.py only
runs py-spy for the PIDs named here and hands the JSON back to :func:`interpret`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hangscope.analyze.evidence.classify import classify_process
from hangscope.analyze.evidence.locks import filelock_path, polls_filelock
from hangscope.analyze.evidence.p2p import in_p2p, p2p_call_of_thread
from hangscope.analyze.evidence.store_key import LineText, store_keys, store_op, waits_in_store
from hangscope.model import Process
from hangscope.model.waits import LocalsRead


def wants_locals(proc: Process) -> bool:
    """Its working thread polls a filelock, waits in a point-to-point op or in a store
    get/wait (the key is in its caller's locals)."""
    # Never a process in D: a ptrace attach to it may wait for the kernel (live/sampler.py).
    return not proc.is_exited and proc.state != "D" and (
        polls_filelock(proc) or in_p2p(proc) or waits_in_store(proc))


def locals_wanted(procs: Sequence[Process]) -> tuple[tuple[int, ...], dict[int, int | None],
                                                  dict[int, str]]:
    """(PIDs to ask, PID -> the working thread whose locals matter, PID -> the store call
    its working thread is blocked in)."""
    # Classified here (pure, ~µs a process) for the working thread; analyze() does it again.
    asked = [c for p in procs if wants_locals(c := classify_process(p))]
    ops = {p.pid: op for p in asked if (op := store_op(p.working_thread)) is not None}
    return tuple(p.pid for p in asked), {p.pid: p.working_tid for p in asked}, ops


def interpreter(tids: dict[int, int | None], ops: dict[int, str] | None = None,
                line_text: LineText | None = None,
                ) -> Callable[[int, Sequence[object]], LocalsRead]:
    """What a process's ``--locals`` say about the thread ``tids`` names (``line_text``
    reads a frame's source line: the sampler's collect/source.py ``line_text``)."""
    def interpret(pid: int, threads: Sequence[object]) -> LocalsRead:
        tid = tids.get(pid)
        op = (ops or {}).get(pid)
        keys = store_keys(threads, tid, line_text, op) if op and line_text else ()
        return LocalsRead(pid, lock_file=filelock_path(threads, tid),
                          p2p=p2p_call_of_thread(threads, tid), store_keys=keys)
    return interpret
