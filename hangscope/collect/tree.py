"""Find the whole job from any one of its PIDs: ``pstree -p``, ``ps -o pid,ppid,args``.

The only module that walks the process tree with psutil. Roles and rank coordinates come from
process titles, the environment, the launcher's flags and, last, spawn order
(see ``hangscope.analyze.roles`` for the pure rules).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import psutil

from hangscope.analyze.roles import looks_like_python, looks_like_worker
from hangscope.collect.procfs import read_cmdline, read_environ
from hangscope.errors import PermissionDenied, ProcessNotFound, UsageError


@dataclass(frozen=True)
class Found:
    """A process of the job as discovery sees it."""

    pid: int
    ppid: int | None
    cmdline: tuple[str, ...]
    exe: str | None
    create_time: float | None
    environ: dict[str, str] | None
    status: str | None
    children: tuple[int, ...] = ()
    exit_codes: dict[int, int] = field(default_factory=dict)


def _info(proc: psutil.Process) -> Found | None:
    try:
        with proc.oneshot():
            ppid = proc.ppid()
            create = proc.create_time()
            status = proc.status()
            try:
                exe = proc.exe()
            except (psutil.AccessDenied, psutil.ZombieProcess, OSError):
                exe = None
            kids = tuple(c.pid for c in proc.children())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return Found(proc.pid, None, read_cmdline(proc.pid), None, None, None, None)
    return Found(
        pid=proc.pid,
        ppid=ppid,
        cmdline=read_cmdline(proc.pid),
        exe=exe,
        create_time=create,
        environ=read_environ(proc.pid),
        status=status,
        children=kids,
    )


def check_target(pid: int) -> psutil.Process:
    """Validate the user's PID before anything else.

    Raises:
        UsageError: the PID is not a positive number, or is hangscope itself.
        ProcessNotFound: no such process.
    """
    if pid <= 0:
        raise UsageError(f"{pid} is not a process ID: give the PID of a rank or of the launcher.")
    if pid == os.getpid():
        raise UsageError(f"{pid} is hangscope itself: give the PID of the job to diagnose.")
    try:
        proc = psutil.Process(pid)
        proc.status()
    except psutil.NoSuchProcess as exc:
        raise ProcessNotFound(f"No process with PID {pid} exists.") from exc
    except psutil.AccessDenied as exc:
        raise PermissionDenied(f"Not allowed to inspect PID {pid}.") from exc
    except (OverflowError, ValueError) as exc:
        raise UsageError(f"{pid} is not a valid process ID.") from exc
    if _is_kernel_thread(pid):
        raise UsageError(f"PID {pid} is a kernel thread ({_name(proc)}), not part of a job: "
                         "give the PID of the launcher or of a rank (`pgrep -af python`).")
    if pid == 1 and not looks_like_python(read_cmdline(1)):
        # The whole machine descends from init: hangscope would trace every Python process
        # on it. A container whose PID 1 is the Python launcher is still accepted.
        raise UsageError(f"PID 1 is the init process ({_name(proc)}), not a job: give the PID "
                         "of the launcher or of a rank (`pgrep -af python`).")
    return proc


_PF_KTHREAD = 0x00200000  # include/linux/sched.h


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


def _is_kernel_thread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[-1].split()
        return bool(int(fields[6]) & _PF_KTHREAD)
    except (OSError, ValueError, IndexError):
        return False


def find_root(pid: int) -> int:
    """Climb from the given PID to the job's launcher.

    Climb while the current process looks like a worker (a titled rank, a process with RANK
    in its environment, a multiprocessing child, a fork of its parent) and its parent is a
    Python process that is not hangscope itself. Shells, init, tmux and pytest stop the climb.
    """
    me = os.getpid()
    current = psutil.Process(pid)
    while True:
        try:
            parent = current.parent()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return current.pid
        if parent is None or parent.pid in (0, 1, me):
            return current.pid
        cmd = read_cmdline(current.pid)
        parent_cmd = read_cmdline(parent.pid)
        env = read_environ(current.pid) or {}
        if not looks_like_python(parent_cmd):
            return current.pid
        if not looks_like_worker(cmd, env, parent_cmd):
            return current.pid
        current = parent


def walk(root: int, limit: int = 4096) -> list[Found]:
    """The root and all its descendants, in tree order (parents before children)."""
    try:
        top = psutil.Process(root)
    except psutil.NoSuchProcess as exc:
        raise ProcessNotFound(f"No process with PID {root} exists.") from exc
    out: list[Found] = []
    queue = [top]
    seen: set[int] = set()
    while queue and len(out) < limit:
        proc = queue.pop(0)
        if proc.pid in seen:
            continue
        seen.add(proc.pid)
        info = _info(proc)
        if info is None:
            continue
        out.append(info)
        for kid in info.children:
            try:
                queue.append(psutil.Process(kid))
            except psutil.NoSuchProcess:
                continue
    return out
