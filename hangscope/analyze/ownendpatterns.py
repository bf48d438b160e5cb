"""A reader that holds the other end itself: EOF (or the reply) can never come.

``socket.socketpair()`` or ``os.pipe()``, then ``fork()``: the parent reads its end until the
child closes the other one, but the parent still holds the child's end too (it never closed it
after the fork), and so does every child forked after it. The child that wrote exits; the
read never returns, because a pipe or socket sees EOF only when *every* holder of the other end
has closed it. The kernel says all of it: the waiter's own fds hold the peer (or the write
end), and the only other holders are exited or themselves wait on the waiter (siblings that
inherited the end and block on their own pipes to it).
"""

from __future__ import annotations

from hangscope.analyze.waitwalk import Graph, site_words, thread_words
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def _own_holds(g: Graph, pid: int, obj: str, kind: str) -> bool:
    """``pid``'s fds hold the other end of the wait ``obj`` (``Unix socket A (peer P)``,
    ``pipe N (write end)``)."""
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    fds = next((pf.fds for pf in kernel.processes if pf.pid == pid), ()) if kernel else ()
    if kind == "unix":
        peer = obj.rpartition("(peer ")[2].rstrip(")")
        return peer.isdigit() and any(r.inode == int(peer) for r in fds)
    inode = obj.split(" ")[1]
    return obj.endswith("(write end)") and inode.isdigit() and any(
        r.inode == int(inode) and r.access in ("w", "rw") for r in fds)


def own_end(g: Graph) -> WaitPattern | None:
    """A thread blocked reading a pipe or a Unix socket whose other end its own process holds,
    where every other holder waits on that process or is gone."""
    for i, edge in enumerate(g.edges):
        # A blocking read of that one fd (a poll of several is an event loop's: its self-pipe
        # has both ends in the process by design).
        if edge.kind not in ("unix", "pipe") or not edge.how.startswith(("read", "recv")) or (
                edge.kind == "pipe" and not edge.object.endswith("(write end)")):
            continue
        if not _own_holds(g, edge.pid, edge.object, edge.kind):
            continue
        if edge.kind == "pipe" and _other_python_threads(g, edge.pid, edge.tid):
            continue  # a thread of its own may write that pipe (a queue's feeder thread)
        same = [e for e in g.edges if (e.pid, e.tid, e.object) == (edge.pid, edge.tid,
                                                                    edge.object)]
        others = {e.to_pid for e in same if e.to_pid not in (None, edge.pid)}
        if any(not _waits_on(g, pid, edge.pid, edge.object) for pid in others):
            continue  # another holder may still write it
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


def _waits_on(g: Graph, pid: int, target: int, obj: str) -> bool:
    """``pid`` is gone, or it waits on ``target`` through a pipe or socket of its own, not
    either end of ``obj``'s connection: it only inherited the end ``obj`` names, and uses
    another to talk to ``target`` (the other side of that very connection is its user)."""
    proc = g.procs.get(pid)
    if proc is None or proc.is_exited:
        return True
    ours = {word.strip("()") for word in obj.split() if word.strip("()").isdigit()}
    return any(e.pid == pid and e.to_pid == target and e.kind in ("unix", "pipe")
               and not ours & {w.strip("()") for w in e.object.split()} for e in g.edges)


def _other_python_threads(g: Graph, pid: int, tid: int) -> bool:
    proc = g.procs.get(pid)
    return proc is not None and any(t.tid != tid and any(not f.native for f in t.frames)
                                    for t in proc.threads)
