"""A reply that never comes: a front end waits for replies while every process that could
send them waits for new work.

A front end (a serving engine's tokenizer manager, where clients' requests wait) that blocks
in its event loop inside the program's own synchronous call (``run_until_complete`` called
from the program's frame, as ``Engine.generate`` does; ``asyncio.run`` at a script's top is a
server's loop, not a call awaiting a result) is waiting for the results of the coroutines it
started. Every process its sockets connect it to can send those results; where each of them
waits for its next message (idle, nothing computing, stopped or blocked in a lock), nobody is
working on the request: its reply was lost or routed to another process (sglang#33858: an
abort routed to tokenizer worker 0, which logged "unknown rid ..., dropping"). The waiting
front end is where the user's request is stuck: the suspect, helper or not.
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.progress import SLOW, STUCK
from hangscope.analyze.graph.waitwalk import Graph, site_words
from hangscope.analyze.patterns.calm.engines import python_names, waits_for_message
from hangscope.model import Process, Role, Snapshot, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

#: The roles of a front end: where an engine's clients' requests wait for their replies.
FRONT_ROLES = frozenset({Role.TOKENIZER})
#: The event loop run inside a call: the frame whose caller waits for its result.
_RUN = re.compile(r"^(?:\S+\.)?run_until_complete \((?:[^)]*/)?asyncio/base_events\.py\)")
#: A log line that says a message was thrown away (an unknown id, a dropped reply).
_DROPPED = re.compile(r"\b(?:unknown|unexpected|dropp|discard|ignor)", re.IGNORECASE)
#: CPU (% of one core) under which a process is taken as waiting.
_WAITING_CPU = 5.0


def awaits_own_call(thread: Thread | None) -> bool:
    """The thread's event loop runs inside ``run_until_complete`` called from the program's
    own frame (not asyncio's runner): a synchronous call that waits for a result."""
    names = python_names(thread) if thread is not None else []
    k = next((i for i, n in enumerate(names) if _RUN.search(n)), None)
    return k is not None and k + 1 < len(names) and "asyncio/" not in names[k + 1]


def _peers(snap: Snapshot, pid: int) -> set[int]:
    """The processes holding the other end of ``pid``'s Unix or TCP connections."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    mine = kernel.process(pid) if kernel is not None else None
    if kernel is None or mine is None:
        return set()
    holders: dict[int, set[int]] = {}
    for pf in kernel.processes:
        for rec in pf.fds:
            if rec.target.startswith("socket:") and rec.inode is not None:
                holders.setdefault(rec.inode, set()).add(pf.pid)
    peer = {u.inode: u.peer for u in kernel.unix_peers if u.listener is None}
    tcp = {(c.local, c.remote): c.inode for c in kernel.tcp}
    ends = {c.inode: (c.remote, c.local) for c in kernel.tcp}
    found: set[int] = set()
    for rec in mine.fds:
        other = peer.get(rec.inode or -1)
        if other is None and (rec.inode or -1) in ends:
            other = tcp.get(ends[rec.inode or -1])
        found |= holders.get(other, set()) if other is not None else set()
    return found - {pid}


def _idle(snap: Snapshot, proc: Process) -> bool:
    """``proc`` waits for its next message, did nothing in the window, and is not stopped."""
    measured = next((r for r in snap.progress.ranks if r.pid == proc.pid),
                    None) if snap.progress is not None else None
    thread = proc.working_thread
    return not (proc.is_stopped or proc.state == "D" or (proc.cpu_percent or 0.0) >= _WAITING_CPU
                or (measured is not None and measured.decision not in (STUCK, SLOW))
                or (thread is not None and not waits_for_message(proc, thread)))


def lost_reply(g: Graph) -> WaitPattern | None:
    snap = g.snap
    live = [p for p in snap.processes if not p.is_exited]
    for front in live:
        thread = front.working_thread
        if front.role not in FRONT_ROLES or not awaits_own_call(thread) or not _idle(
                snap, front):
            continue
        senders = [g.procs[pid] for pid in sorted(_peers(snap, front.pid)) if pid in g.procs]
        if not senders or not all(_idle(snap, p) for p in live):
            continue
        assert thread is not None
        named = senders
        shown = [who(p) for p in named]
        idle = " and ".join([", ".join(shown[:-1]), shown[-1]] if len(shown) > 1 else shown)
        chain = (f"{who(front)}{f' ({front.title})' if front.title else ''} waits for replies"
                 f"{site_words(thread)}, its event loop run inside that call with the requests' "
                 f"coroutines parked; {idle} {'waits' if len(named) == 1 else 'wait'} for new "
                 "work, not blocked: nothing is working on the request, whose reply was lost or "
                 "routed to another process")
        said = [line.strip() for p in live if p.pid != front.pid for line in p.log_tail
                if _DROPPED.search(line)]
        if said:
            chain += f"; the log says: {said[-1][:200]!r}"
        return WaitPattern("lost_reply", (front.pid, *(p.pid for p in named)), chain, (),
                           front.pid, thread.tid)
    return None
