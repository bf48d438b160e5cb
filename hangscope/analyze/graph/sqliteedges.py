"""The wait-for edges of a thread that polls a file lock: SQLite's busy handler keeps retrying
(the database is locked), or the ``filelock`` package's acquire loop sleeps and tries again;
/proc/locks names who holds it.

Pure, over a thread's stack and its process's open files. SQLite never blocks in the kernel
for a lock: it takes POSIX locks with ``F_SETLK`` (non-blocking) on the database file and,
when another connection holds one, sleeps and retries in its busy handler until the
connection's timeout (``sqlite3.connect(timeout=...)``); a retry loop around "database is
locked" keeps it there for ever. The stack says so (``sqlite3InvokeBusyHandler``, the default
``sqliteDefaultBusyCallback``), and the holder of a lock on a file the thread's process has
open is the process it waits for: a transaction left open (``BEGIN IMMEDIATE`` held across a
wait for a reply) holds its RESERVED lock until it commits.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence

from hangscope.analyze.evidence.locks import file_lock_waits
from hangscope.model import Process, Snapshot, Thread
from hangscope.model.waits import FdRecord, WaitEdge

_BUSY = ("sqlite3InvokeBusyHandler", "sqliteDefaultBusyCallback", "btreeInvokeBusyHandler")

#: file key (device major, minor, inode) -> (pid, fd or None, lock kind) of each holder
LockHolders = Mapping[tuple[int, int, int], Sequence[tuple[int, int | None, str]]]


#: The C library's sleeps: SQLite's busy handler waits with ``usleep`` (``unixSleep``).
_SLEEPS = frozenset({"usleep", "nanosleep", "clock_nanosleep", "__nanosleep",
                     "__clock_nanosleep"})


def in_busy_handler(thread: Thread) -> bool:
    """SQLite's busy handler is on the stack: by name, or a sleep called straight from
    libsqlite3 (SQLite sleeps nowhere else; a native unwind under load can stop at the
    library's unnamed static frames, short of ``sqlite3InvokeBusyHandler``), or, where the
    unwind stopped at the C library itself, ``usleep`` under a Python call that is no
    ``time.sleep`` (which sleeps in ``clock_nanosleep``, never ``usleep``: SQLite's
    ``unixSleep`` does). The edge also needs a lock another process holds on a file this one
    has open, so a C extension's own ``usleep`` makes none elsewhere."""
    frames = [f for f in thread.frames if f.native]
    if any(f.name.startswith(_BUSY) for f in frames):
        return True
    for inner, outer in itertools.pairwise(frames):
        if inner.name in _SLEEPS and "libsqlite3" in (outer.module or outer.file or ""):
            return True
    names = {f.name for f in frames}
    return "usleep" in names and "time_sleep" not in names


def sqlite_edges(proc: Process, thread: Thread, fds: Mapping[int, FdRecord],
                 holders: LockHolders) -> Iterator[WaitEdge]:
    """A thread in SQLite's busy handler -> each other process holding a POSIX lock on a file
    its process has open (the database, or its WAL's -shm)."""
    # Running (R) too: the handler wakes between its sleeps to try the lock again, and the
    # kernel's state is read at another moment than the stack (a retrier read R under load).
    if thread.state not in ("S", "D", "R") or not in_busy_handler(thread):
        return
    seen: set[int] = set()
    for rec in sorted(fds.values(), key=lambda r: r.fd):
        if rec.device is None or rec.inode is None:
            continue
        for pid, _fd, kind in holders.get((*rec.device, rec.inode), ()):
            if pid == proc.pid or kind != "POSIX" or pid in seen:
                continue
            seen.add(pid)
            yield WaitEdge(proc.pid, thread.tid, "file_lock",
                           f"SQLite database lock on {rec.target}",
                           "sqlite3's busy handler retries on its stack (the database is "
                           "locked); /proc/locks names the process holding a lock on it",
                           to_pid=pid)


def filelock_edges(snap: Snapshot) -> Iterator[WaitEdge]:
    """A process polling a ``filelock`` lock (it opens the file, tries ``flock`` with
    ``LOCK_NB`` and sleeps: the kernel never sees it wait) -> the process of the job holding
    the lock on the file it wants (its ``lock_file`` from ``--locals``; or, without it, the
    only file locked in the job). A holder that waits on the poller closes a cycle (a parent
    that holds the lock while it writes the start-up data of a worker polling it)."""
    waits = snap.waits
    if waits is None or not waits.file_locks:
        return
    procs = {p.pid: p for p in snap.processes}
    for lock in file_lock_waits(snap.processes, waits.file_locks, waits.lock_files()):
        if not lock.polling or lock.holder not in procs:
            continue
        for pid in lock.waiters:
            tid = procs[pid].working_tid
            if tid is not None and pid != lock.holder:
                yield WaitEdge(pid, tid, "file_lock",
                               f"file lock on {lock.path or 'a file the job locks'}",
                               "filelock's acquire loop polls it (a try with LOCK_NB, then a "
                               "sleep); /proc/locks names the process holding it",
                               to_pid=lock.holder)
