"""The job's wait-for graph: an edge A -> B says thread A cannot move until B acts.

Pure, over a classified Snapshot and its kernel wait facts (``Snapshot.waits.kernel``, read by
collect/procfs.py ``read_kernel_waits``). Each blocked thread's wait is followed wherever the
other end can be read:

- the syscall a thread is in (``/proc/PID/task/TID/syscall``: number and fd) names the fd;
  a pipe or FIFO fd leads to every process of the job holding its other end (fdinfo's
  O_ACCMODE), a Unix socket to the holder of its peer inode (sock_diag), a TCP socket to the
  holder of the socket whose ends are this one's swapped (none: the job's listener on that
  local port, whose accept queue holds the connection), a terminal to the user; a socket's
  edge leads to the holder's threads blocked on that peer socket alone (their syscall's fd:
  a connection's handler thread, not the main thread idle in accept), to the process where
  none is (or for a store: its daemon polls every client);
- ``wait4(pid)`` leads to that child (or every child, for -1);
- ``flock``/``fcntl(F_SETLKW, F_OFD_SETLKW)`` on a file leads to the holders of a lock on it
  (fdinfo's ``lock:`` lines name OFD locks' holders, which /proc/locks shows as pid -1;
  /proc/locks the rest);
- a thread in a zmq receive leads to the peers of the connections its process's zmq I/O
  threads watch (analyze/graph/zmqedges.py);
- a thread in ``take_gil`` leads to the thread of its process that owns the GIL (py-spy);
- a thread waiting on a Python lock leads to the thread whose stack is inside a block that
  holds it (``with self.lock:`` around a frame's line, collect/source.py: the same name in
  the same class or module; itself, when its own outer frame holds it); or else to the one
  thread past that line in the same function ("probable holder": Python names no holder);
- a thread in a framework's get of an object (``ray.get``) leads to the process hosting the
  object's producer (analyze/graph/objectedges.py), and a hand-off to its own feeder thread.

Collectives and point-to-point waits stay with analyze/evidence/p2p.py and the collective rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hangscope.analyze.evidence.locks import describe_outside, outside_doing
from hangscope.analyze.graph.collectiveedges import collective_edges
from hangscope.analyze.graph.fdindex import FdIndex
from hangscope.analyze.graph.grpcedges import grpc_edges
from hangscope.analyze.graph.handoffedges import handoff_edges
from hangscope.analyze.graph.listeners import listeners_of
from hangscope.analyze.graph.loopedges import loop_future_edges
from hangscope.analyze.graph.objectedges import all_object_edges, feeder_edges
from hangscope.analyze.graph.owedreply import owed_reply_edges
from hangscope.analyze.graph.partners import likely_partner_first, to_handler
from hangscope.analyze.graph.queueedges import queue_lock_edges, queue_put_edges, to_feeder
from hangscope.analyze.graph.rpcedges import rpc_edges
from hangscope.analyze.graph.socketpeers import peer_edges
from hangscope.analyze.graph.sqliteedges import filelock_edges, sqlite_edges
from hangscope.analyze.graph.threadedges import (
    gil_edges,
    import_lock_edges,
    join_edges,
    own_end_writers,
    py_lock_edges,
)
from hangscope.analyze.graph.ttyedges import terminal_edges
from hangscope.analyze.graph.unread import quiet, unread_edges
from hangscope.analyze.graph.zmqedges import owed_loop_edges, zmq_edges
from hangscope.model import Process, Snapshot, Thread
from hangscope.model.waits import SELF_CONNECTED, SYSCALLS, FdRecord, KernelWaits, WaitEdge

_NAMES = {"x86_64": {2: "open", 257: "openat", 0: "read", 1: "write", 45: "recvfrom",
                     44: "sendto", 47: "recvmsg", 46: "sendmsg", 61: "wait4", 247: "waitid",
                     73: "flock", 72: "fcntl", 17: "pread64", 19: "readv", 20: "writev",
                     7: "poll", 271: "ppoll"},
          "aarch64": {56: "openat", 63: "read", 64: "write", 207: "recvfrom", 206: "sendto",
                      212: "recvmsg", 211: "sendmsg", 260: "wait4", 95: "waitid", 32: "flock",
                      25: "fcntl", 73: "ppoll"}}
_LOCK_NB = 4
_SETLKW = {7, 38}  # F_SETLKW, F_OFD_SETLKW


def _key(rec: FdRecord) -> tuple[str, int, int, int] | None:
    if rec.inode is None:
        return None
    if rec.device is None:
        return ("inode", 0, 0, rec.inode)  # pipe:[N], socket:[N]: unique per host
    return ("file", *rec.device, rec.inode)


def _index(snap: Snapshot, kernel: KernelWaits) -> FdIndex:
    idx = FdIndex({p.pid: p for p in snap.processes}, arch=kernel.arch)
    for pf in kernel.processes:
        by_fd = {r.fd: r for r in pf.fds}
        idx.fds[pf.pid] = by_fd
        for call in pf.syscalls:
            idx.calls[call.tid] = (call.nr, call.args, call.polled)
            idx.tids.setdefault(pf.pid, []).append(call.tid)
            if call.path is not None:
                idx.fifo_paths[call.tid] = call.path
            idx.watched[call.tid] = call.watched
        for rec in pf.fds:
            key = _key(rec)
            if key is not None:
                idx.holders.setdefault(key, []).append((pf.pid, rec))
            for lock in rec.locks:
                if not lock.blocked:
                    idx.lock_holders.setdefault(lock.file_key, []).append(
                        (pf.pid, rec.fd, lock.kind))
    waits = snap.waits
    for lock in waits.file_locks if waits is not None else ():
        if not lock.blocked and lock.pid is not None:
            found = idx.lock_holders.setdefault(lock.file_key, [])
            if not any(pid == lock.pid for pid, _, _ in found):
                found.append((lock.pid, None, lock.kind))
    for proc in snap.processes:
        for sock in proc.listening:
            if sock.kind.startswith("tcp") and sock.port is not None and not proc.is_exited:
                idx.listeners.setdefault(sock.port, []).append((sock.address, proc.pid))
    idx.unix_peer = {u.inode: u.peer for u in kernel.unix_peers if u.listener is None}
    idx.unix_pending = {u.inode: (u.listener, u.name) for u in kernel.unix_peers
                        if u.listener is not None}
    idx.unsent = {end.inode: end.unsent for end in (*kernel.unix_peers, *kernel.tcp)
                  if end.unsent is not None}
    for other in waits.outside if waits is not None else ():
        for inode in other.sockets:
            idx.outside_tcp[inode] = (other, True)
        for inode in other.pending:
            idx.outside_tcp[inode] = (other, False)
    for conn in kernel.tcp:
        idx.tcp[conn.inode] = (conn.local, conn.remote)
        idx.tcp_by_ends[(conn.local, conn.remote)] = conn.inode
        idx.conns[conn.inode] = conn
    return idx


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _pid_t(value: int) -> int:
    """A syscall's pid argument as the kernel reads it: a signed 32-bit pid_t."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _fd_edges(idx: FdIndex, proc: Process, thread: Thread, what: str, name: str,
              fd: int) -> Iterator[WaitEdge]:
    """Edges of a thread blocked reading or writing fd ``fd``."""
    rec = idx.fds.get(proc.pid, {}).get(fd)
    if rec is None:
        return
    how = f"{name}(fd {fd}) in the kernel"
    if rec.target.startswith(("/dev/pts/", "/dev/tty")):
        yield from terminal_edges(idx.fds, idx.calls, idx.tids,
                                  SYSCALLS.get(idx.arch, {}).get("read", set()), proc, thread,
                                  rec, how, what)
        return
    if rec.target == "/dev/ptmx":
        return  # a pty's master, read by whoever relays a program's output: that program
    if rec.target.startswith("socket:") and rec.inode is not None:
        yield from _socket_edges(idx, proc, thread, rec, how, what)
        return
    key = _key(rec)
    if key is None or (key[0] == "file" and thread.state == "D"):
        if thread.state == "D":
            yield WaitEdge(proc.pid, thread.tid, "disk", rec.target, how, outside="the disk")
        return
    # A pipe or FIFO: the reader waits for a writer, the writer for a reader.
    want = "w" if what == "read" else "r"
    end = "write" if want == "w" else "read"
    others = sorted({pid for pid, r in idx.holders.get(key, [])
                     if r.access in (want, "rw") and (pid, r.fd) != (proc.pid, fd)})
    kind = "pipe" if rec.target.startswith("pipe:") else "fifo"
    obj = (f"pipe {rec.inode}" if kind == "pipe" else f"FIFO {rec.target}") + f" ({end} end)"
    how += f"; the fd links' open modes say who holds the {end} end"
    if not others:
        yield WaitEdge(proc.pid, thread.tid, kind, obj, how, fd=fd,
                       outside=f"whoever opens the {end} end (no process of the job has it)")
    for pid in others:
        yield WaitEdge(proc.pid, thread.tid, kind, obj, how, to_pid=pid, fd=fd)


def _socket_edges(idx: FdIndex, proc: Process, thread: Thread, rec: FdRecord, how: str,
                  what: str) -> Iterator[WaitEdge]:
    assert rec.inode is not None
    peer = idx.unix_peer.get(rec.inode)
    if peer is not None:
        holders = idx.holders_of(peer)
        obj = f"Unix socket {rec.inode} (peer {peer})"
        how += "; sock_diag names its peer"
        if not holders:
            yield WaitEdge(proc.pid, thread.tid, "unix", obj, how, fd=rec.fd,
                           outside="a process outside the job (the peer's holder)")
        for pid in holders:
            yield from peer_edges(idx, SYSCALLS.get(idx.arch), proc, thread, "unix", obj, how,
                                  pid, peer, rec.fd)
        return
    pending = idx.unix_pending.get(rec.inode)
    if pending is not None:
        # Connected by the kernel, in the listener's accept queue: no process holds its
        # server end, so the wait is on the listener's holder, which has not accepted it.
        listener, path = pending
        obj = f"Unix socket {rec.inode} (to {path or 'an unnamed listener'})"
        how = (f"{how}; no process holds its other end: it waits in the accept queue of the "
               f"Unix socket listening on {path or 'an unnamed address'} (not accepted yet)")
        holders = idx.holders_of(listener)
        if not holders:
            yield WaitEdge(proc.pid, thread.tid, "unix", obj, how, fd=rec.fd,
                           outside="a process outside the job (the listener's holder)")
        for pid in holders:
            yield WaitEdge(proc.pid, thread.tid, "unix", obj, how, to_pid=pid, fd=rec.fd)
        return
    ends = idx.tcp.get(rec.inode)
    if ends is None:
        return
    shown = (_addr(ends[0]), _addr(ends[1]))
    if ends[0] == ends[1]:
        # A TCP self-connect: a connect() to a local port in the ephemeral range may be given
        # that same port as its source, and the handshake (a simultaneous open) succeeds with
        # no listener. The socket is its own peer: only its own writes could ever arrive.
        yield WaitEdge(proc.pid, thread.tid, "tcp", f"TCP {shown[0]} -> {shown[1]} "
                       f"{SELF_CONNECTED}", f"{how}; its local and remote ends are one address",
                       to_pid=proc.pid, to_tid=thread.tid, fd=rec.fd)
        return
    other = idx.tcp_by_ends.get((ends[1], ends[0]))
    holders = idx.holders_of(other) if other is not None else []
    store = _store_frame(thread)
    kind = "store" if store else "tcp"
    obj = f"the c10d store at {shown[1]}" if store else f"TCP {shown[0]} -> {shown[1]}"
    how += "; its TCP ends match the other socket's, swapped"
    if not holders:
        # No process holds the other end: on this host the connection may sit, established by
        # the kernel, in a listening socket's accept queue; its listener has not accepted it.
        holders = listeners_of(idx.listeners, shown[0], shown[1]) if other is None else []
        if holders:
            how = (f"{how.split(';')[0]}; no process holds its other end: it waits in the "
                   f"accept queue of the socket listening on {shown[1]} (not accepted yet)")
    if not holders:
        far = idx.outside_tcp.get(rec.inode)
        if far is not None and not far[1]:
            how = (f"{how.split(';')[0]}; no process holds its other end: it waits in the "
                   f"accept queue of the socket PID {far[0].pid} listens on (not accepted yet)")
        elif far is not None:
            how += f"; PID {far[0].pid}, outside the job, holds that socket"
        yield WaitEdge(proc.pid, thread.tid, kind, obj, how, outside=_far_end(idx, rec.inode,
                                                                              shown[1]),
                       fd=rec.fd)
    for pid in holders:
        if other is None or store:  # the accept queue, or a store's daemon: the process
            yield WaitEdge(proc.pid, thread.tid, kind, obj, how, to_pid=pid, fd=rec.fd)
        else:
            yield from peer_edges(idx, SYSCALLS.get(idx.arch), proc, thread, kind, obj, how,
                                  pid, other, rec.fd)


def _far_end(idx: FdIndex, inode: int, remote: str) -> str:
    """What a TCP wait with no other end in the job waits for: the process outside the job
    that holds that end on this host (or listens for it), else the remote address."""
    found = idx.outside_tcp.get(inode)
    if found is None:
        return f"{remote} (remote)"
    other, accepted = found
    did = ("which accepted the connection and has not answered" if accepted else
           f"which listens on {remote} and has not accepted the connection")
    return f"{describe_outside(other)}, {did}: it {outside_doing(other)}"


def _addr(end: str) -> str:
    """``0:0:0:0:0:ffff:7f00:1:29500`` (IPv4 mapped into IPv6) as ``127.0.0.1:29500``."""
    prefix = "0:0:0:0:0:ffff:"
    if not end.startswith(prefix):
        return end
    parts = end[len(prefix):].split(":")
    if len(parts) != 3:
        return end
    try:
        hi, lo = int(parts[0], 16), int(parts[1], 16)
    except ValueError:
        return end
    return f"{hi >> 8}.{hi & 255}.{lo >> 8}.{lo & 255}:{parts[2]}"


def _store_frame(thread: Thread) -> bool:
    """The thread waits inside a c10d store call (``TCPStore::get``/``wait``)."""
    return any("TCPStore" in f.name or (not f.native and f.file and "distributed" in f.file
               and f.name.rsplit(".", 1)[-1] in ("get", "wait") and "store" in f.file)
               for f in thread.frames[:12])


def _kernel_edges(idx: FdIndex, arch: str, proc: Process, thread: Thread) -> Iterator[WaitEdge]:
    call = idx.calls.get(thread.tid)
    table = SYSCALLS.get(arch)
    if call is None or table is None or thread.state not in ("S", "D"):
        return
    nr, args, polled = call
    name = _NAMES.get(arch, {}).get(nr, f"syscall {nr}")
    if nr in table["poll"] or polled:  # each polled fd: a read (POLLIN) or a write (POLLOUT)
        name = name if nr in table["poll"] else "poll"  # restarted after a ptrace stop
        for fd, events in polled:
            what = "read" if events & 1 else "write" if events & 4 else None
            if what is not None:
                yield from _fd_edges(idx, proc, thread, what, name, fd)
    elif nr in table["read"] or nr in table["write"]:
        yield from _fd_edges(idx, proc, thread, "read" if nr in table["read"] else "write",
                             name, args[0] if args else -1)
    elif nr in table["wait"]:
        # pid_t is 32 bits: a shell's wait4(-1) shows as 4294967295 in the register.
        child = _pid_t(args[0]) if args else -1
        if nr in (247, 95):  # waitid(idtype, id, ...): P_PID is 1; P_ALL, P_PGID: any child
            child = _pid_t(args[1]) if len(args) > 1 and args[0] == 1 else -1
        # -1 is any child; 0 and -PGID a child of a process group. The group is not read, so
        # every live child stands for it (a group's members are among them): a shell's `wait`
        # then leads on to the command it runs instead of out of the job.
        kids = [child] if child > 0 else [p.pid for p in idx.procs.values()
                                         if p.ppid == proc.pid and not p.is_exited]
        shown = "any child" if child == -1 else str(child)
        for kid in kids:
            yield WaitEdge(proc.pid, thread.tid, "child", f"child {kid}",
                           f"{name}({shown}) in the kernel", to_pid=kid)
    elif nr in table["open"] and thread.tid in idx.fifo_paths:
        yield _fifo_open_edge(idx, proc, thread, name, nr, args)
    elif (nr in table["flock"] and args and not args[1] & _LOCK_NB) or (
            nr in table["fcntl"] and len(args) > 1 and args[1] in _SETLKW):
        rec = idx.fds.get(proc.pid, {}).get(args[0])
        if rec is None or rec.device is None or rec.inode is None:
            return
        fkey = (*rec.device, rec.inode)
        how = f"{name}(fd {args[0]}) blocks in the kernel; fdinfo and /proc/locks name the holders"
        for pid, fd, kind in idx.lock_holders.get(fkey, []):
            if (pid, fd) == (proc.pid, args[0]) or (kind == "POSIX" and pid == proc.pid):
                continue
            yield WaitEdge(proc.pid, thread.tid, "file_lock", f"{kind} lock on {rec.target}",
                           how, to_pid=pid)


def _fifo_open_edge(idx: FdIndex, proc: Process, thread: Thread, name: str, nr: int,
                    args: tuple[int, ...]) -> WaitEdge:
    """A thread blocked opening a FIFO waits for a process to open its other end; none of the
    job has (the open would have returned), so the edge leads outside, to whoever should."""
    path = idx.fifo_paths[thread.tid]
    flags = args[1 if nr == 2 else 2] if len(args) > 2 else 0
    mode = "writing" if flags & 3 == 1 else "reading"
    other = "reading" if mode == "writing" else "writing"
    return WaitEdge(proc.pid, thread.tid, "fifo_open", f"FIFO {path} (opened for {mode})",
                    f"{name}() of a FIFO blocks in the kernel (wchan wait_for_partner) until a "
                    f"process opens it for {other}; the path read from its memory",
                    outside=f"no process of the job opens it for {other}")


def _zmq(idx: FdIndex, kernel: KernelWaits, connected: frozenset[int], proc: Process,
         thread: Thread) -> list[WaitEdge]:
    """A zmq receive's edges (its mailbox is an eventfd: no fd names the peer)."""
    return list(zmq_edges(kernel, idx.fds.get(proc.pid, {}), connected, proc, thread,
                          lambda p, t, r, h: _socket_edges(idx, p, t, r, h, "read"),
                          idx.unsent))


# -- the interpreter's waits -------------------------------------------------------------

def build_edges(snap: Snapshot) -> tuple[WaitEdge, ...]:
    """Every wait-for edge of a single-host snapshot ((): no kernel facts, or several hosts:
    PIDs repeat across nodes and fds do not cross them)."""
    if len(snap.host_names) > 1:
        return ()
    waits = snap.waits
    kernel = waits.kernel if waits is not None else None
    idx = _index(snap, kernel) if kernel is not None else None
    edges: list[WaitEdge] = []
    connected = frozenset((*idx.unix_peer, *idx.tcp)) if idx is not None else frozenset()
    still = quiet(snap) if idx is not None else frozenset()
    objects = all_object_edges(snap)
    feeding = feeder_edges(snap, objects)  # (the hand-offs of their processes lead there)
    for proc in snap.processes:
        if proc.is_exited:
            continue
        mine: list[WaitEdge] = []
        if idx is not None and kernel is not None:
            for thread in proc.threads:
                found = [*_kernel_edges(idx, kernel.arch, proc, thread),
                         *unread_edges(idx, proc, thread, still),
                         *owed_reply_edges(idx, snap, proc, thread, still)]
                mine.extend(found or _zmq(idx, kernel, connected, proc, thread))
                mine.extend(sqlite_edges(proc, thread, idx.fds.get(proc.pid, {}),
                                         idx.lock_holders))
                for queued in (queue_put_edges, queue_lock_edges):
                    mine.extend(queued(proc, thread, idx.fds, idx.procs))
        mine.extend(handoff_edges(proc, [*mine, *feeding.get(proc.pid, ())]))
        gil = list(gil_edges(proc))
        edges.extend(own_end_writers(proc, [*mine, *gil]))
        edges.extend([*join_edges(proc), *loop_future_edges(proc), *py_lock_edges(proc),
                      *import_lock_edges(proc)])
    if idx is not None and kernel is not None:  # (after the other edges: it reads them)
        edges.extend(owed_loop_edges(kernel, idx.fds, connected, snap.processes, edges,
                                     lambda p, t, r, h: _socket_edges(idx, p, t, r, h, "read")))
    edges.extend([*collective_edges(snap), *rpc_edges(snap), *grpc_edges(snap), *objects])
    edges.extend(filelock_edges(snap))
    threads = {(p.pid, t.tid): t for p in snap.processes for t in p.threads}
    working = {p.pid: p.working_tid for p in snap.processes}
    return tuple(to_feeder(to_handler(likely_partner_first(edges, threads), threads, working),
                           {p.pid: p for p in snap.processes}))


def edges_from(edges: Sequence[WaitEdge]) -> dict[int, list[int]]:
    """PID -> indexes of its edges, in order."""
    out: dict[int, list[int]] = {}
    for i, edge in enumerate(edges):
        out.setdefault(edge.pid, []).append(i)
    return out
