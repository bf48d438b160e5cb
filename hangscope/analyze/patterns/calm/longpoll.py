"""A long poll: a server holds each request in a timed wait, then answers (304, "no news").

A config service, a job queue or a notification endpoint answers ``GET /config?version=N`` only
when there is something newer, or when a timeout passes; its clients ask again at once. In a
dump its handler threads wait on a Condition and its clients wait for a reply, which looks like
a lost request. The kernel tells them apart: a handler's futex wait carries a timeout (its
fourth argument, a pointer to the deadline; Python's ``Condition.wait(timeout)``,
``Event.wait(timeout)``, ``Queue.get(timeout=)``), and a timed futex that a ptrace stop
interrupted goes on as ``restart_syscall`` (an untimed one restarts as ``futex``). A server
whose blocked handler threads all wait with a deadline answers every client by that deadline:
idle, not hung.
"""

from __future__ import annotations

from hangscope.model import Category, Process, Snapshot
from hangscope.model.waits import SYSCALLS


def timed_waits(snap: Snapshot) -> frozenset[int]:
    """Threads (IDs) blocked in a futex wait that has a deadline."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    table = SYSCALLS.get(kernel.arch) if kernel is not None else None
    if kernel is None or table is None:
        return frozenset()
    futex = table["futex"] | table["restart"]
    wchan = {t.tid: t.wchan or "" for p in snap.processes for t in p.threads}
    return frozenset(c.tid for pf in kernel.processes for c in pf.syscalls
                     if c.nr in futex and len(c.args) > 3 and c.args[3] != 0
                     and wchan.get(c.tid, "").startswith("futex"))


def holds_requests_with_deadline(snap: Snapshot, server: Process) -> bool:
    """``server`` listens, and every thread of it blocked on a lock or condition other than
    its main loop's (its request handlers) waits with a deadline; at least one does."""
    if not server.listening:
        return False
    handlers = [t for t in server.threads if t.tid != server.pid
                and t.category is Category.LOCK]
    if not handlers:
        return False
    timed = timed_waits(snap)
    return all(t.tid in timed for t in handlers)
