"""A reader that holds the other end itself: EOF (or the reply) can never come.

``socket.socketpair()`` (or ``multiprocessing.Pipe()``), then ``fork()``: the parent reads its
end until the child closes the other one, but the parent still holds the child's end too (it
never closed it after the fork), and so does every child forked after it. The child that
wrote exits; the read never returns, because a socket sees EOF only when *every* holder of the
other end has closed it. The kernel says all of it: the waiter's own fds hold the peer, a child
of it has exited (unreaped), and the only other holders are its children, which inherited the
end and block on channels of their own to it.
"""

from __future__ import annotations

from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def _own_holds(g: Graph, pid: int, obj: str, kind: str) -> bool:
    """``pid``'s fds hold the other end of the wait ``obj`` (``Unix socket A (peer P)``,
    ``pipe N (write end)``)."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    mine = kernel.process(pid) if kernel else None
    fds = mine.fds if mine is not None else ()
    if kind == "unix":
        peer = obj.rpartition("(peer ")[2].rstrip(")")
        return peer.isdigit() and any(r.inode == int(peer) for r in fds)
    inode = obj.split(" ")[1]
    return obj.endswith("(write end)") and inode.isdigit() and any(
        r.inode == int(inode) and r.access in ("w", "rw") for r in fds)


def own_end(g: Graph) -> WaitPattern | None:
    """A thread blocked reading a Unix socket whose other end its own process holds, one of
    whose children exited, and whose other holders are its children, each waiting on it
    through its own channel."""
    for i, edge in enumerate(g.edges):
        # A blocking read of that one fd (a poll of several is an event loop's: its self-pipe
        # has both ends in the process by design).
        # A socketpair (a multiprocessing.Queue's pipe has both ends in its reader by design).
        if edge.kind != "unix" or not edge.how.startswith(("read", "recv")):
            continue
        if not _own_holds(g, edge.pid, edge.object, edge.kind):
            continue
        same = [e for e in g.edges if (e.pid, e.tid, e.object) == (edge.pid, edge.tid,
                                                                    edge.object)]
        others = {e.to_pid for e in same if e.to_pid not in (None, edge.pid)}
        # The fork's marks: a child of the waiter has exited (the writer it waited for), and
        # the other holders are its children, each blocked on a channel of its own to it.
        if not _exited_child(g, edge.pid) or any(
                not _child_waiting(g, pid, edge.pid, edge.object) for pid in others):
            continue
        proc = g.procs[edge.pid]
        thread = g.threads.get((edge.pid, edge.tid))
        what = edge.object.split(" (")[0]
        also = (" (and " + ", ".join(who(g.procs[p]) for p in sorted(others) if p in g.procs)
                + ", which inherited it and wait on it in turn)") if others else ""
        chain = (f"{thread_words(proc, thread)} waits to read {what}{site_words(thread)} until "
                 f"the other end is closed or written, but {who(proc)} holds that other end "
                 f"itself{also}: the read can only end when every holder closes it. Close the "
                 "other end in the parent right after fork() (and in children that do not use "
                 "it), or pass close_fds/only the fds each child needs")
        return WaitPattern("own_end", (edge.pid, *sorted(others)), chain, (i,), edge.pid,
                           edge.tid)
    return None


def _child_waiting(g: Graph, pid: int, parent: int, obj: str) -> bool:
    """``pid`` is a child of ``parent`` that waits on it through a pipe or socket of its own,
    not either end of ``obj``'s connection: it only inherited the end ``obj`` names (the other
    side of that very connection would be its user)."""
    proc = g.procs.get(pid)
    if proc is None or proc.is_exited or proc.ppid != parent:
        return False
    ours = {word.strip("()") for word in obj.split() if word.strip("()").isdigit()}
    return any(e.pid == pid and e.to_pid == parent and e.kind in ("unix", "pipe")
               and not ours & {w.strip("()") for w in e.object.split()} for e in g.edges)


def _exited_child(g: Graph, parent: int) -> bool:
    return any(p.ppid == parent and p.is_exited for p in g.procs.values())
