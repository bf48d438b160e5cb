"""File locks held and awaited: ``cat /proc/locks`` and ``ls -l /proc/PID/fd``.

/proc/locks lists every flock, POSIX (fcntl) and OFD lock of the host, one line each, with the
holder's PID and the file as ``major:minor:inode``; a process blocked waiting for a lock is a
``->`` line under the lock it waits for. The file's path comes from the fd links of a process
that has it open (the holder, or a blocked waiter: both keep the file open).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

from hangscope.model.waits import FileLockRecord

# "12: -> FLOCK  ADVISORY  WRITE 4321 fe:00:2147657 0 EOF"
_LINE = re.compile(
    r"^\s*(?P<index>\d+):\s+(?P<blocked>->\s+)?(?P<kind>FLOCK|POSIX|OFDLCK|LEASE|BREAKING|"
    r"DELEG|ACCESS|UNKNOWN)\s+(?P<mode>ADVISORY|MANDATORY|\S+)\s+(?P<access>\S+)\s+"
    r"(?P<pid>-?\d+)\s+(?P<major>[0-9a-f]+):(?P<minor>[0-9a-f]+):(?P<inode>\d+)\s+"
    r"(?P<start>\S+)\s+(?P<end>\S+)")


def parse_proc_locks(text: str) -> tuple[FileLockRecord, ...]:
    """Parse the text of /proc/locks; lines it does not know are skipped."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid = int(m["pid"])
        out.append(FileLockRecord(
            index=int(m["index"]), kind=m["kind"], mandatory=m["mode"] == "MANDATORY",
            access=m["access"], pid=pid if pid > 0 else None,
            device=(int(m["major"], 16), int(m["minor"], 16)), inode=int(m["inode"]),
            blocked=bool(m["blocked"])))
    return tuple(out)


def open_files(pid: int, keys: Collection[tuple[int, int, int]],
               proc: str = "/proc") -> dict[tuple[int, int, int], str]:
    """Paths of the files among ``keys`` that ``pid`` has open (``ls -l /proc/PID/fd``)."""
    found: dict[tuple[int, int, int], str] = {}
    base = f"{proc}/{pid}/fd"
    try:
        fds = os.listdir(base)
    except OSError:  # gone, or not ours to read: the path stays unknown
        return found
    for fd in fds:
        try:
            st = os.stat(f"{base}/{fd}")
        except OSError:
            continue
        key = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
        if key in keys and key not in found:
            try:
                found[key] = os.readlink(f"{base}/{fd}")
            except OSError:
                continue
    return found


def file_keys(paths: Iterable[str]) -> dict[tuple[int, int, int], str]:
    """``stat PATH``: the (major, minor, inode) key /proc/locks names each file by."""
    out: dict[tuple[int, int, int], str] = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:  # gone, or not ours to see: no lock of it can be matched
            continue
        out[(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)] = path
    return out


def read_file_locks(pids: Iterable[int], proc: str = "/proc",
                    files: Mapping[tuple[int, int, int], str] | None = None
                    ) -> tuple[FileLockRecord, ...]:
    """The locks that matter to a job: those on files any of ``pids`` holds or waits for,
    and those on ``files`` (key -> path: the files its polling ``filelock`` waiters want,
    which never show in /proc/locks as waiters: only their holder does).

    Whole lock chains are kept (a waiter of the job on a lock held outside it names that
    holder), each with the file's path where a process of the chain has it open.
    """
    try:
        with open(f"{proc}/locks") as f:
            records = parse_proc_locks(f.read())
    except OSError:
        return ()
    wanted = set(pids)
    keys = {r.file_key for r in records if r.pid in wanted} | set(files or ())
    chain = [r for r in records if r.file_key in keys]
    paths: dict[tuple[int, int, int], str] = dict(files or {})
    for pid in sorted({r.pid for r in chain if r.pid is not None}, key=lambda p: p not in wanted):
        missing = keys - paths.keys()
        if not missing:
            break
        paths.update(open_files(pid, missing, proc))
    return tuple(replace(r, path=paths.get(r.file_key)) for r in chain)


def lock_holders_of_waiters(pids: Collection[int], proc: str = "/proc") -> set[int]:
    """The PIDs holding a file lock that one of ``pids`` is blocked waiting for.

    A holder may be no descendant of the job at all (a daemon it started with setsid, now a
    child of init): the kernel still names it, so the wait has somewhere to lead. OFD locks
    show pid -1 and name no one here (fdinfo names their holders to the wait-for graph).
    """
    try:
        with open(f"{proc}/locks") as f:
            records = parse_proc_locks(f.read())
    except OSError:
        return set()
    waiting = {r.file_key for r in records if r.blocked and r.pid in pids}
    return {r.pid for r in records if not r.blocked and r.file_key in waiting
            and r.pid is not None and r.pid not in pids}

