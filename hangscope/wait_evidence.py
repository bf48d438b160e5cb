"""Wait evidence: who holds which file lock, and whom each point-to-point rank waits for.

Pure, frozen data written by the sampler (collect/locks.py reads ``/proc/locks``; py-spy
``--locals`` gives a polling waiter's lock file and a p2p rank's peer) and read by the verdict
rules (analyze/locks.py, analyze/p2p.py). Like evidence.py, no ``from __future__ import
annotations``: field types are real objects, so serialize.py's generic reader resolves them.
Definitions in dependency order.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class FileLockRecord:
    """One line of /proc/locks: a lock held, or (``blocked``) a process waiting for it."""

    index: int  # the lock's number; a waiter's "->" line carries the number of its lock
    kind: str  # FLOCK | POSIX | OFDLCK | LEASE
    mandatory: bool
    access: str  # READ | WRITE
    pid: int | None  # None for OFD locks, which belong to an open file, not a process
    device: tuple[int, int]  # (major, minor), as os.major/os.minor of st_dev
    inode: int
    blocked: bool = False
    path: str | None = None  # from a process's fd links; None when nobody of the job has it open

    @property
    def file_key(self) -> tuple[int, int, int]:
        return (*self.device, self.inode)


@dataclass(frozen=True)
class P2PCall:
    """One rank's pending point-to-point op and its peer, as the c10d frame's locals give it."""

    op: str  # send | recv
    peer: int | None  # the peer's global rank (``src``/``dst``), None when not given
    group_peer: int | None = None  # the peer's rank in ``group`` (``group_src``/``group_dst``)
    tag: int | None = None
    group: str | None = None  # the group's repr; None is the default (world) group


@dataclass(frozen=True)
class LocalsRead:
    """What ``py-spy dump --locals`` said of one process's working thread (asked only of
    ranks polling a ``filelock`` or blocked in send/recv)."""

    pid: int
    lock_file: str | None = None  # the file a polling filelock waiter wants
    p2p: P2PCall | None = None  # its pending send/recv and the peer
    error: str | None = None  # why nothing was read (py-spy failed or timed out)


@dataclass(frozen=True)
class WaitEvidence:
    """The job's file locks (/proc/locks, whole chains) and the locals read of its waiters."""

    file_locks: tuple[FileLockRecord, ...] = ()
    locals: tuple[LocalsRead, ...] = ()

    def lock_files(self) -> dict[int, str]:
        """PID -> the file a polling waiter wants."""
        return {r.pid: r.lock_file for r in self.locals if r.lock_file}
