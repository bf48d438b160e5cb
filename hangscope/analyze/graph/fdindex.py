"""The kernel facts of one snapshot by the keys the wait-for edges join on (built by
analyze/graph/waitgraph.py, read by every edge module that follows an fd to its peers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangscope.model import Process
from hangscope.model.waits import FdRecord, OutsideProcess, TcpConnection


@dataclass
class FdIndex:
    """The kernel facts of one snapshot, by the keys the edges join on."""

    procs: dict[int, Process]
    fds: dict[int, dict[int, FdRecord]] = field(default_factory=dict)  # pid -> fd -> record
    calls: dict[int, tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]]] = field(
        default_factory=dict)  # tid -> (syscall number, args, polled fds)
    holders: dict[tuple[str, int, int, int], list[tuple[int, FdRecord]]] = field(
        default_factory=dict)  # object key -> (pid, fd) of every process holding it open
    unix_peer: dict[int, int] = field(default_factory=dict)
    # a client end a listener has not accepted: the listener's inode and path
    unix_pending: dict[int, tuple[int, str | None]] = field(default_factory=dict)
    tcp: dict[int, tuple[str, str]] = field(default_factory=dict)  # inode -> (local, remote)
    tcp_by_ends: dict[tuple[str, str], int] = field(default_factory=dict)
    conns: dict[int, TcpConnection] = field(default_factory=dict)  # inode -> its kernel facts
    # socket inode -> the bytes it sent that its peer has not read (Unix) or acknowledged (TCP)
    unsent: dict[int, int] = field(default_factory=dict)
    lock_holders: dict[tuple[int, int, int], list[tuple[int, int | None, str]]] = field(
        default_factory=dict)  # file key -> (pid, fd or None, lock kind)
    listeners: dict[int, list[tuple[str, int]]] = field(
        default_factory=dict)  # TCP port -> (listening address, pid)
    tids: dict[int, list[int]] = field(default_factory=dict)  # pid -> tids with a syscall read
    fifo_paths: dict[int, str] = field(default_factory=dict)  # tid -> FIFO it blocks opening
    # tid -> the (fd, events) its epoll instance watches (an event loop's sockets)
    watched: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # the job's TCP socket inode -> the process outside the job holding its other end, and
    # whether that one accepted the connection (False: it sits in its listener's queue)
    outside_tcp: dict[int, tuple[OutsideProcess, bool]] = field(default_factory=dict)
    arch: str = ""

    def holders_of(self, inode: int) -> list[int]:
        """The PIDs holding socket (or other object) ``inode`` open."""
        return sorted({pid for pid, _ in self.holders.get(("inode", 0, 0, inode), [])})
