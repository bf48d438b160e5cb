"""The job's processes born during a dump: children of the processes discovery listed.

Discovery lists the job once, before the first round; a framework that starts a worker while
the dump runs (Ray's raylet starting the worker of the actor its driver waits on, a pool
replacing a worker) makes one nobody samples. As the window ends, each listed process's
children are read again (``/proc/PID/task/*/children``); one born after the dump began is a
:class:`Newcomer`: its birth, its CPU since and its state, from ``/proc/PID/stat``, no pause.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from hangscope.collect import procfs
from hangscope.model import Process
from hangscope.model.progress import Newcomer
from hangscope.redact import redact_argv


def since_boot() -> float:
    """Now, on the clock of a process's start time in ``/proc/PID/stat`` (``CLOCK_BOOTTIME``:
    the boot's wall time is known to the second only, too coarse for a birth)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def newcomers(procs: Sequence[Process], began: float, redact: bool) -> tuple[Newcomer, ...]:
    """Children of ``procs`` born at or after ``began`` (:func:`since_boot` seconds)."""
    known = {p.pid for p in procs}
    found: list[Newcomer] = []
    for proc in procs:
        if proc.is_exited:
            continue
        for pid in procfs.read_children(proc.pid):
            stat = procfs.read_stat(pid) if pid not in known else None
            if stat is None:
                continue
            known.add(pid)
            born = stat.start_ticks / procfs.CLOCK_TICKS
            if born < began:
                continue  # older than the dump: not one discovery missed for its birth
            argv = procfs.read_cmdline(pid)
            found.append(Newcomer(
                pid=pid, ppid=proc.pid,
                title=" ".join(redact_argv(argv) if redact else argv),
                born_s=round(born - began, 3), cpu_s=stat.cpu_ticks / procfs.CLOCK_TICKS,
                state=stat.state))
    return tuple(found)
