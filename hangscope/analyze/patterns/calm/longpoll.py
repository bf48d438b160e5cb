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

from hangscope.analyze.evidence.progress_hints import timed_waits
from hangscope.model import Category, Process, Snapshot


def holds_requests_with_deadline(snap: Snapshot, server: Process) -> bool:
    """``server`` listens, and every thread of it blocked on a lock or condition other than
    its main loop's (its request handlers) waits with a deadline; at least one does."""
    if not server.listening:
        return False
    handlers = [t for t in server.threads if t.tid != server.pid
                and t.category is Category.LOCK]
    if not handlers:
        return False
    timed = timed_waits(snap.processes, snap.waits.kernel if snap.waits is not None else None)
    return all(t.tid in timed for t in handlers)
