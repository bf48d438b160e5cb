"""Visitors: processes outside the job's own tree that came to it only as its clients.

Discovery (collect/tree.py ``job_peers``) pulls in the other end of the job's TCP
connections: a curl, a load generator, a benchmark client waiting on the server's port. Such
a process is evidence (a request is in flight, and someone waits for its answer), never the
cause: a wait-for chain that starts at it says only that the server has not answered, where a
chain inside the job says why. A client the job started itself (its child, or a member of the
launcher's process group or session: ``bash run.sh`` starting a server and its client) is part
of the job, not a visitor.
"""

from __future__ import annotations

from hangscope.model import Process, Role, Snapshot
from hangscope.model.waits import port_of


def job_tree(snap: Snapshot) -> frozenset[int]:
    """The launcher (or the target) and every process below it, by parent links."""
    root = snap.job.launcher or snap.job.target
    by_pid = {p.pid: p for p in snap.processes}
    tree: set[int] = set()
    for proc in snap.processes:
        seen, pid = 0, proc.pid
        while pid in by_pid and seen < 64:
            if pid == root:
                tree.add(proc.pid)
                break
            pid, seen = by_pid[pid].ppid or 0, seen + 1
    return frozenset(tree)


def visitors(snap: Snapshot) -> frozenset[int]:
    """The PIDs of the job's visitors: outside its tree and its launcher's process group, and
    holding a TCP connection to a port a process of the tree listens on."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    if kernel is None:
        return frozenset()
    tree = job_tree(snap)
    by_pid = {p.pid: p for p in snap.processes}
    root = by_pid.get(snap.job.launcher or snap.job.target or 0)
    ports = {s.port for pid in tree for s in by_pid[pid].listening
             if s.kind in ("tcp", "tcp6") and s.port}
    if not ports or root is None:
        return frozenset()
    remote_port = {c.inode: _port(c.remote) for c in kernel.tcp}
    return frozenset(p.pid for p in snap.processes if _visits(p, tree, root, ports, remote_port,
                                                              snap))


def _visits(proc: Process, tree: frozenset[int], root: Process, ports: set[int],
            remote_port: dict[int, int], snap: Snapshot) -> bool:
    if proc.pid in tree or proc.role is not Role.OTHER or (
            root.pgrp is not None and proc.pgrp == root.pgrp) or proc.listening:
        return False
    fds = snap.waits.kernel.process(proc.pid) if snap.waits and snap.waits.kernel else None
    return fds is not None and any(
        r.inode is not None and remote_port.get(r.inode) in ports
        for r in fds.fds if r.target.startswith("socket:"))


def _port(address: str) -> int:
    return port_of(address) or 0
