"""The wait-for graph's blocked event loop: an asyncio loop's thread blocked in a synchronous
read inside one of its coroutines, so no other task of the loop runs until it returns.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph); the loop's own frames come
from
analyze/graph/loopedges.py (a child forked inside a coroutine does not run its parent's loop).
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.progress import MIN_MOVED_SAMPLES
from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.evidence.working import notified_frames, notified_wait, raw_window
from hangscope.analyze.graph.loopedges import LOOP, loop_index, own_frames
from hangscope.analyze.graph.threadedges import blocked, user_frame
from hangscope.analyze.graph.waitwalk import Graph
from hangscope.analyze.graph.zmqedges import OWED_HOW
from hangscope.analyze.patterns.behind import behind
from hangscope.model import Frame, Process, Snapshot, in_library
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def loop_reads(g: Graph, i: int) -> Frame | None:
    """Edge ``i`` is an asyncio loop's thread blocked in a synchronous read inside one of its
    coroutines: the user frame that reads (the loop runs nothing else until it returns)."""
    edge = g.edges[i]
    thread = g.threads.get((edge.pid, edge.tid))
    if thread is None or edge.kind not in ("unix", "tcp", "pipe", "fifo", "store") \
            or edge.how.startswith(OWED_HOW):  # the idle loop itself, awaiting its peers
        return None
    python = own_frames(thread)
    loop = loop_index(thread)
    if loop is None or loop == 0:
        return None
    # The site is the program's own coroutine that made the call (issue 35: "the coroutine
    # that made the call"), not the library's read inside it; a read of the program's own
    # making has no library frame above it.
    inner = next((f for f in python[:loop] if not in_library(f.file)), None) \
        or user_frame(thread)
    return inner if inner is not None and python.index(inner) <= loop else None


#: The innermost frame of a window's sample at the loop's own wait for its next event.
_LOOP_WAIT = re.compile(r"^(?:\S+\.)?(?:select|poll) \((?:[^)]*/)?selectors\.py(?::\d+)?\)$")


def turned(snap: Snapshot, proc: Process, tid: int) -> bool:
    """The progress window saw the loop's thread back at its loop's own wait (its selector's
    select under asyncio's loop): the read it is in now returned in the window, and the loop
    ran its other tasks in between (a loop that fetches its config synchronously each turn
    is slow, not blocked: the dump caught it in one of its fetches)."""
    raw = raw_window(snap, proc)
    thread = next((t for t in raw.threads if t.tid == tid), None) if raw is not None else None
    return thread is not None and sum(
        s.count for s in thread.stacks if s.frames and _LOOP_WAIT.search(s.frames[-1])
        and any("asyncio/base_events.py" in f for f in s.frames)) >= MIN_MOVED_SAMPLES


def event_loop(g: Graph) -> WaitPattern | None:
    for i, edge in enumerate(g.edges):
        inner = loop_reads(g, i)
        if inner is None or turned(g.snap, g.procs[edge.pid], edge.tid):
            continue
        thread = g.threads[(edge.pid, edge.tid)]
        proc = g.procs[edge.pid]
        target = g.procs.get(edge.to_pid) if edge.to_pid is not None else None
        them = who(target) if target is not None else (edge.outside or "outside the job")
        chain = (f"the asyncio event loop of {who(proc)} (thread {thread.name or thread.tid}) "
                 f"is blocked in a synchronous read of {edge.object} inside "
                 f"{inner.name} ({inner.short_file}:{inner.line}), waiting for {them}: no other "
                 "task of the loop runs until it returns; await it (loop.sock_recv, asyncio "
                 "streams) or run it in an executor")
        return WaitPattern("event_loop", (proc.pid,), chain, (i,), proc.pid, thread.tid)
    return None


def loop_sync_wait(g: Graph) -> WaitPattern | None:
    """An asyncio loop's thread blocked in a thread-to-thread wait (``Condition.wait``,
    ``Event.wait``, ``Queue.get``) inside a callback of the program's own: a synchronous
    method run on the loop (a Ray async actor runs its plain ``def`` methods there too,
    ray#44454). No other task of the loop runs until it returns, so whatever would notify it
    from a coroutine of the same loop (the actor's async method) never runs; and others wait
    on the process behind it."""
    for proc in g.having(_loop_and_notified):  # (asked once per distinct stack: at scale)
        if proc.is_exited:
            continue
        for thread in proc.threads:
            loop = loop_index(thread)
            if not loop or not blocked(thread) or turned(g.snap, proc, thread.tid):
                continue
            wait = notified_wait(thread)
            python = own_frames(thread)
            inner = next((f for f in python[:loop] if not in_library(f.file)), None)
            if wait is None or inner is None or any(
                    t.python and t.tid != thread.tid and not t.helper and not blocked(t)
                    for t in proc.threads):
                continue  # another thread of it works: it may be the one that notifies
            members = (proc.pid,)
            chain = (f"the asyncio event loop of {who(proc)} (thread {thread.name or thread.tid}) "
                     f"is blocked in {wait.name} ({wait.short_file}:{wait.line}) inside "
                     f"{inner.name} ({inner.short_file}:{inner.line}), a synchronous call run on "
                     "the loop: no other task of the loop runs until it returns, so a coroutine "
                     "of the same loop that would notify it never runs. Make it async (await an "
                     "asyncio.Event or Condition) or run it off the loop (run_in_executor, or a "
                     "threaded actor instead of an async one)" + behind(g, members))
            return WaitPattern("loop_sync_wait", members, chain, (), proc.pid, thread.tid)
    return None


@per_stack
def _loop_and_notified(frames: tuple[Frame, ...]) -> bool:
    """A stack inside an asyncio loop's run and in a thread-to-thread wait."""
    return notified_frames(frames) is not None and any(
        not f.native and f.file and "asyncio" in f.file and f.name.rsplit(".", 1)[-1] in LOOP
        for f in frames)
