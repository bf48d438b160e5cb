"""The processes outside the job that its waits lead to: ``cat /proc/locks``, ``ss -tn``,
``ls -l /proc/*/fd``, ``cat /proc/PID/{cmdline,stat,wchan}``, ``py-spy dump --nonblocking``.

A rank polling a ``filelock`` held by a sidecar in a session of its own, or an event loop
blocked reading a connection to a local service that never answers: the wait ends at a process
no tree walk finds. The kernel still names it: /proc/locks gives a lock holder's PID (flock and
POSIX; an OFD lock shows -1), and a TCP connection on this host has its other end in the same
socket table, held by a process whose fd links name that socket's inode (or, not accepted yet,
queued on a listening socket whose inode its owner holds). Read only for the few sockets a
blocked thread of the job waits on, so a server with thousands of connections costs no more.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Collection, Iterable

from hangscope.collect import procfs
from hangscope.collect.pyspy import dump
from hangscope.model.waits import KernelWaits, OutsideProcess, TcpConnection
from hangscope.titles import looks_like_python

#: Outside processes described at most (each may cost one py-spy dump, ~0.1-0.3 s).
MAX_OUTSIDE = 4
#: The job's TCP connections whose far end is looked for at most.
MAX_SOCKETS = 8
#: Processes whose fds are listed at most while looking for a socket's owner.
SCAN_LIMIT = 2048
_LOOPBACK = ("127.", "::1", "::ffff:127.", "0:0:0:0:0:ffff:7f")


def waited_sockets(kernel: KernelWaits) -> dict[int, int]:
    """Socket inode -> PID, for the sockets a blocked thread of the job names: the fd of its
    syscall (read, recvfrom: the first argument), or one it polls or its epoll watches (an
    epoll instance watching two fds at most)."""
    out: dict[int, int] = {}
    for pf in kernel.processes:
        socks = {r.fd: r.inode for r in pf.fds
                 if r.inode is not None and r.target.startswith("socket:")}
        for call in pf.syscalls:
            fds = {call.args[0]} if call.args else set()
            fds |= {fd for fd, _ in call.polled}
            # A server's loop idle in epoll_wait watches every connection and waits on none
            # of them: only a loop watching its self-pipe and one socket waits on that one.
            if len(call.watched) <= 2:
                fds |= {fd for fd, _ in call.watched}
            for fd in fds:
                if fd in socks:
                    out.setdefault(socks[fd], pf.pid)
    return out


def _is_local(address: str, local: str) -> bool:
    """``address`` is this host's: loopback, or the connection's own local address."""
    return address.startswith(_LOOPBACK) or address == local


def _split(end: str) -> tuple[str, int]:
    address, _, port = end.rpartition(":")
    return address.strip("[]"), int(port) if port.isdigit() else -1


def far_ends(conns: Iterable[TcpConnection]) -> dict[tuple[str, str], int]:
    """(local, remote) as the far side sees it -> the inode of the socket there (0: a
    connection the kernel established that waits, unaccepted, in a listener's queue), for
    the ends of ``conns`` (sock_diag, as ``ss -tn`` reads it)."""
    wanted = {(c.remote, c.local) for c in conns}
    found: dict[tuple[str, str], int] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        def inet(payload: bytes, family: int = family) -> None:
            if len(payload) < 72:
                return
            sport, dport = struct.unpack_from("!HH", payload, 4)
            key = (f"{procfs._addr_text(family, payload[8:24])}:{sport}",
                   f"{procfs._addr_text(family, payload[24:40])}:{dport}")
            if key in wanted:
                found[key] = struct.unpack_from("=I", payload, 68)[0]

        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0,
                              0xFFF & ~(1 << procfs._TCP_LISTEN))
        if not wanted or not procfs._diag_dump(request + bytes(48), inet):
            break
    return found


def socket_owners(inodes: Collection[int], skip: Collection[int]) -> dict[int, int]:
    """Socket inode -> the PID holding it (``ls -l /proc/*/fd``), looking at this user's
    processes (all of them as root) but ``skip``, and stopping once every inode is found."""
    left = {f"socket:[{i}]": i for i in inodes}
    out: dict[int, int] = {}
    uid = os.getuid()
    scanned = 0
    for pid in procfs.pids():
        if not left or scanned >= SCAN_LIMIT:
            break
        if pid in skip or pid <= 1 or (uid != 0 and procfs.owner_uid(pid) != uid):
            continue
        scanned += 1
        base = f"{procfs.PROC}/{pid}/fd"
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{base}/{name}")
            except OSError:
                continue
            inode = left.pop(target, None)
            if inode is not None:
                out[inode] = pid
    return out


def tcp_peers(kernel: KernelWaits, job: Collection[int]) -> dict[int, tuple[set[int], set[int]]]:
    """PID outside the job -> (the job's socket inodes whose other end it holds, those queued
    unaccepted on a socket it listens on), for the TCP connections on this host that a
    blocked thread of the job waits on."""
    waited = waited_sockets(kernel)
    ours = {(c.local, c.remote) for c in kernel.tcp}
    conns = [c for c in kernel.tcp if c.inode in waited and c.local != c.remote
             and (c.remote, c.local) not in ours  # the other end is the job's: the graph's
             and _is_local(_split(c.remote)[0], _split(c.local)[0])][:MAX_SOCKETS]
    if not conns:
        return {}
    ends = far_ends(conns)
    held: dict[int, int] = {}  # far socket inode -> the job's inode
    queued: dict[int, int] = {}  # job inode -> the listening socket's inode
    listening = None
    for c in conns:
        far = ends.get((c.remote, c.local))
        if far:
            held[far] = c.inode
            continue
        # Not held by any fd: the kernel completed the handshake into a listener's backlog.
        if listening is None:
            listening = procfs.read_listening()
        address, port = _split(c.remote)
        listener = next((s.inode for s in listening.values() if s.kind.startswith("tcp")
                         and s.port == port and s.address in (address, "0.0.0.0", "::")), None)
        if listener:
            queued[c.inode] = listener
    owners = socket_owners(set(held) | set(queued.values()), job)
    out: dict[int, tuple[set[int], set[int]]] = {}
    for far, inode in held.items():
        if far in owners:
            out.setdefault(owners[far], (set(), set()))[0].add(inode)
    for inode, listener in queued.items():
        if listener in owners:
            out.setdefault(owners[listener], (set(), set()))[1].add(inode)
    return out


def describe(pid: int, pyspy: str | None, timeout: float,
             sockets: Iterable[int] = (), pending: Iterable[int] = ()) -> OutsideProcess:
    """What an outside process is doing: its command line, its main thread's state and wchan,
    and, when it runs Python, its innermost frame from one ``py-spy dump --nonblocking``
    (read without stopping it: a process that is no part of the job is never paused)."""
    cmdline = procfs.read_cmdline(pid)
    stat = procfs.read_stat(pid)
    wchan = procfs._cat(f"{procfs.PROC}/{pid}/wchan")
    site = None
    if cmdline and looks_like_python(cmdline):
        result = dump(pid, native=False, timeout=timeout, nonblocking=True, pyspy=pyspy)
        main = next((t for t in result.threads if t.tid == pid), None) or next(
            iter(result.threads), None)
        frame = next((f for f in main.frames if not f.native), None) if main else None
        if frame is not None:
            site = f"{frame.name} ({os.path.basename(frame.file or '?')}:{frame.line})"
    return OutsideProcess(pid, cmdline, stat.state if stat else None,
                          wchan.strip() if wchan and wchan.strip() != "0" else None, site,
                          tuple(sorted(sockets)), tuple(sorted(pending)))


def read_outside(kernel: KernelWaits | None, lock_holders: Iterable[int], job: Collection[int],
                 pyspy: str | None = None, timeout: float = 2.0) -> tuple[OutsideProcess, ...]:
    """The outside processes the job's waits lead to (file-lock holders first), described."""
    try:
        peers = tcp_peers(kernel, job) if kernel is not None else {}
    except (OSError, ValueError):  # a socket table we cannot read: the peer stays an address
        peers = {}
    pids = list(dict.fromkeys([*(p for p in lock_holders if p not in job), *peers]))
    return tuple(describe(pid, pyspy, timeout, *peers.get(pid, ((), ())))
                 for pid in pids[:MAX_OUTSIDE] if procfs.exists(pid))
