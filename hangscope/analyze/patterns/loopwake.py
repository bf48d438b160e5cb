"""The wait-for graph's unwoken event loop: an asyncio loop asleep in ``epoll_wait`` with
nothing to wake it but its own self-pipe, while another thread of its process hands it work
through a loop-only call (``q.put_nowait(item)`` on an ``asyncio.Queue``,
``fut.set_result(x)`` on a loop future) instead of ``loop.call_soon_threadsafe``.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph). asyncio objects are not
thread-safe: a put from another thread marks the waiter's future done and schedules its
callback with ``call_soon``, which writes nothing to the self-pipe, so a loop sleeping
without a timer never runs it (cpython#97970). The kernel says the loop can only be woken
from inside: every fd its epoll instance watches is a socket whose peer its own process
holds (the self-pipe socketpair), no listening socket, no connection to anyone; the
progress window, where it ran, saw it wake up not once (no timer); and nothing of the job
computes. The source says who should have woken it: the other thread's function makes the
loop-only call (collect/source.py ``loop_unsafe``).
"""

from __future__ import annotations

from hangscope.analyze.evidence.progress import WAKES_PER_PAUSE
from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.graph.liveness import job_computes
from hangscope.analyze.graph.loopedges import loop_index, own_frames
from hangscope.analyze.graph.threadedges import user_frame
from hangscope.analyze.graph.waitwalk import Graph
from hangscope.model import Frame, Process, Thread
from hangscope.model.waits import KernelWaits, WaitPattern
from hangscope.words import who


def loop_handoffs(proc: Process) -> tuple[Thread | None, list[tuple[Thread, str]]]:
    """The one asyncio loop thread of ``proc`` (None: none, or several), and each other
    thread whose own frames make a loop-only call (``Frame.loop_unsafe``), with that call.
    Both callers need such a call, so a process without one is done in one cheap pass (no
    loop search per thread: thousands of ranks have none)."""
    if not any(makes_loop_unsafe_call(t.frames) for t in proc.threads):
        return None, []
    loops = [t for t in proc.threads if loop_index(t) is not None]
    if proc.is_exited or len(loops) != 1:
        return None, []
    return loops[0], [(t, call) for t in proc.threads if t is not loops[0] if (call := next(
        (f.loop_unsafe for f in own_frames(t) if f.loop_unsafe), None))]


@per_stack  # asked of every thread of every rank (a finding and a pattern): once per stack
def makes_loop_unsafe_call(frames: tuple[Frame, ...]) -> bool:
    return any(f.loop_unsafe for f in frames)


def unwoken_loop(g: Graph) -> WaitPattern | None:
    kernel = g.snap.waits.kernel if g.snap.waits is not None else None
    if kernel is None or job_computes(g.snap):
        return None
    for proc in g.snap.processes:
        loop, hands = loop_handoffs(proc)
        if loop is None or not hands or not _asleep_alone(kernel, proc, loop) \
                or _woke(g, proc.pid, loop.tid):
            continue
        thread, call = hands[0]
        inner = user_frame(thread)
        site = f" in {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
        names = ", ".join(dict.fromkeys(t.name or str(t.tid) for t, _ in hands))
        chain = (f"the asyncio event loop of {who(proc)} (thread {loop.name or loop.tid}) "
                 "sleeps in epoll_wait with nothing to wake it but its own self-pipe (no "
                 "timer, no socket to anyone), while thread "
                 f"{thread.name or thread.tid}{site} hands it work with {call}, a loop-only "
                 "call from another thread: it marks the waiting coroutine's future done "
                 "without waking the loop, so that coroutine never runs again; call it "
                 "through loop.call_soon_threadsafe (or asyncio.run_coroutine_threadsafe)")
        if len(hands) > 1:
            chain += f" (threads {names} all do)"
        return WaitPattern("lost_wakeup", (proc.pid,), chain, (), proc.pid, thread.tid)
    return None


def _asleep_alone(kernel: KernelWaits, proc: Process, loop: Thread) -> bool:
    """The loop thread is in epoll_wait and every fd its epoll watches is a connected Unix
    socket whose peer only this process holds (asyncio's self-pipe)."""
    mine = kernel.process(proc.pid)
    call = mine.syscall(loop.tid) if mine else None
    if mine is None or call is None or not call.watched:
        return False
    by_fd = {r.fd: r for r in mine.fds}
    peers = {u.inode: u.peer for u in kernel.unix_peers if u.listener is None}
    holders: dict[int, set[int]] = {}
    for pf in kernel.processes:
        for rec in pf.fds:
            if rec.inode is not None and rec.target.startswith("socket:"):
                holders.setdefault(rec.inode, set()).add(pf.pid)
    for fd, _ in call.watched:
        rec = by_fd.get(fd)
        peer = peers.get(rec.inode) if rec is not None and rec.inode is not None else None
        if peer is None or holders.get(peer, set()) != {proc.pid}:
            return False
    return True


def _woke(g: Graph, pid: int, tid: int) -> bool:
    """The progress window saw the thread wake up (a timer, an event: it runs callbacks),
    beyond the wake-ups the watcher's own pauses cause."""
    for reading in g.snap.readings:
        watched = reading.progress.processes if reading.progress is not None else ()
        for proc in watched:
            thread = next((t for t in proc.threads if t.tid == tid), None) \
                if proc.pid == pid else None
            counters = thread.counters if thread is not None else None
            if counters is not None and counters.voluntary is not None:
                return counters.voluntary - WAKES_PER_PAUSE * proc.pauses > 0
    return False
