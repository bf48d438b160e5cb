"""Connections nobody accepts: a listener with a full accept queue that no thread watches.

The kernel completes a client's TCP or Unix handshake by itself and parks the connection in
the listening socket's accept queue (sock_diag's rqueue of a listener: ``Socket.pending``).
A server accepts it from ``accept()``, or from its event loop when epoll/poll/select reports
the listener readable. When connections wait there while no thread of the server is in
``accept`` and none polls the listener's fd, nothing will ever take them: the loop stopped
watching it (unregistered to pause accepting under load and never resumed; registered with an
epoll instance that another process owns after a fork; a second loop that took the socket).
Clients see a port that is open and requests that never answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangscope.model import Process, Snapshot, Socket
from hangscope.model.waits import KernelWaits


@dataclass(frozen=True)
class Unaccepted:
    """A listener whose queued connections no thread of its process will accept."""

    proc: Process
    socket: Socket
    fd: int
    waits: str  # what the process's loop waits on instead: "epoll over fds 4, 6, 7"


def _address(sock: Socket) -> str:
    return f"port {sock.port}" if sock.port else sock.address


def unaccepted(snap: Snapshot) -> list[Unaccepted]:
    """Every listener of the job with connections queued that no thread accepts or watches."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    if kernel is None:
        return []
    out = []
    for proc in snap.processes:
        queued = [s for s in proc.listening if s.pending > 0 and s.inode is not None]
        if not queued or proc.is_exited or proc.is_stopped:
            continue
        found = _unwatched(kernel, proc, queued)
        if found is not None:
            out.append(found)
    return out


def _unwatched(kernel: KernelWaits, proc: Process, queued: list[Socket]) -> Unaccepted | None:
    mine = kernel.process(proc.pid)
    if mine is None or not mine.syscalls:
        return None
    by_inode = {r.inode: r.fd for r in mine.fds if r.inode is not None}
    # Every fd some blocked thread polls, watches (epoll's interest set) or reads/accepts.
    seen: set[int] = set()
    loops = []
    for call in mine.syscalls:
        fds = [fd for fd, _ in (*call.polled, *call.watched)]
        seen.update(fds)
        if call.args and not fds:
            seen.add(call.args[0])  # accept(fd), read(fd): the fd it blocks on
        if fds:
            loops.append(", ".join(str(fd) for fd in sorted(set(fds))))
    if not loops or any(t.state == "R" for t in proc.threads):
        return None  # nothing polls (no loop to blame), or a thread runs and may accept
    for sock in queued:
        fd = by_inode.get(sock.inode)
        if fd is not None and fd not in seen:
            return Unaccepted(proc, sock, fd, "; ".join(f"fds {w}" for w in loops))
    return None


def unaccepted_words(item: Unaccepted) -> str:
    """The sentence of the verdict: who queues where, and what the loop watches instead."""
    n = item.socket.pending
    return (f"{n} connection{'s wait' if n > 1 else ' waits'} in the accept queue of the socket "
            f"listening on {_address(item.socket)} (fd {item.fd}), and no thread of it accepts "
            f"or polls that fd: its threads wait on {item.waits}, without the listener. Its "
            "loop stopped watching the socket (unregistered to pause accepting and never "
            "resumed, or registered with an epoll instance another process owns after a "
            "fork), so the port is open and no request is ever answered")
