"""The wait-for graph's blocked event loop: an asyncio loop's thread blocked in a synchronous
read inside one of its coroutines, so no other task of the loop runs until it returns.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph); the loop's own frames come
from
analyze/graph/loopedges.py (a child forked inside a coroutine does not run its parent's loop).
"""

from __future__ import annotations

import re

from hangscope.analyze.evidence.progress import MIN_MOVED_SAMPLES
from hangscope.analyze.evidence.roles import is_helper_role
from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.evidence.working import notified_frames, notified_wait, raw_window
from hangscope.analyze.graph.loopedges import LOOP, loop_at, loop_index, own_frames, own_python
from hangscope.analyze.graph.threadedges import blocked, user_frame
from hangscope.analyze.graph.waitwalk import Graph
from hangscope.analyze.graph.zmqedges import OWED_HOW
from hangscope.analyze.patterns.behind import behind
from hangscope.frameworks.native import native_call, native_words
from hangscope.model import Category, Frame, Process, Snapshot, in_library
from hangscope.model.waits import WaitPattern
from hangscope.words import who, who_list


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
#: The same for a loop written in C (uvloop): no Python frame inside the call that runs it.
_C_LOOP_WAIT = re.compile(r"^(?:\S+\.)?run \((?:[^)]*/)?(?:asyncio/runners|uvloop/__init__)"
                          r"\.py(?::\d+)?\)$")


def turned(snap: Snapshot, proc: Process, tid: int) -> bool:
    """The progress window saw the loop's thread back at its loop's own wait (its selector's
    select under asyncio's loop): the read it is in now returned in the window, and the loop
    ran its other tasks in between (a loop that fetches its config synchronously each turn
    is slow, not blocked: the dump caught it in one of its fetches)."""
    raw = raw_window(snap, proc)
    thread = next((t for t in raw.threads if t.tid == tid), None) if raw is not None else None
    return thread is not None and sum(
        s.count for s in thread.stacks if s.frames and (_C_LOOP_WAIT.search(s.frames[-1]) or (
            _LOOP_WAIT.search(s.frames[-1])
            and any("asyncio/base_events.py" in f for f in s.frames)))) >= MIN_MOVED_SAMPLES


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


def loop_on_cpu(g: Graph) -> WaitPattern | None:
    """An asyncio loop's thread on CPU in one synchronous call inside one of its coroutines,
    the same stack in every sample and never back at the loop's wait in the window, while other
    processes wait on that process (a client for its reply, an engine for its next request):
    the loop runs nothing else until the call returns, so nothing it serves moves (vLLM's API
    server in a tool-call parser's backtracking regex, vllm#54678; a tokenizer manager
    tokenizing one huge prompt on its loop). The call computes, so it may end: the verdict says
    how long it was seen and what waits behind it, not that it never returns."""
    for proc in g.having(_in_coroutine):  # (asked once per distinct stack: at scale)
        if proc.is_exited:
            continue
        for thread in proc.threads:
            loop = loop_index(thread)
            if not loop or thread.category not in _ON_CPU or not thread.stuck:
                continue
            call = own_frames(thread)[0]
            if left(g.snap, proc, thread.tid, call):
                continue
            # (a parent waiting for it to exit asks nothing of its loop)
            waits = [i for i, e in enumerate(g.edges) if e.to_pid == proc.pid
                     and e.pid != proc.pid and e.pid in g.procs and e.kind != "child"
                     and not is_helper_role(g.procs[e.pid].role)]
            if not waits:
                continue  # nobody waits on it: a loop that computes, no hang of anyone's
            native = native_words(native_call(thread.frames, system=True))
            waiters = [g.procs[pid] for pid in dict.fromkeys(g.edges[i].pid for i in waits)]
            seconds = g.snap.window_s
            chain = (f"the asyncio event loop of {who(proc)} (thread {thread.name or thread.tid}) "
                     f"has run one synchronous call, {call.name} ({call.short_file}:{call.line})"
                     f"{native}, on CPU in all {thread.samples} samples"
                     + (f" over {seconds:.1f} s" if seconds else "")
                     + " without going back to the loop: no other task of the loop runs until "
                     f"it returns, and {who_list(waiters, 3)} "
                     f"{'wait' if len(waiters) > 1 else 'waits'} on it. A CPU-bound call on "
                     "an event loop (a regular expression that backtracks, a tokenizer, a parse "
                     "of a large body) stalls everything the loop serves: bound its input, or "
                     "run it off the loop (run_in_executor with a process pool)")
            return WaitPattern("loop_on_cpu", (proc.pid, *(p.pid for p in waiters)), chain,
                               tuple(waits), proc.pid, thread.tid)
    return None


def left(snap: Snapshot, proc: Process, tid: int, call: Frame) -> bool:
    """The window saw the thread outside ``call`` (a call the loop ran returned, and the loop
    ran something else: a busy server's loop parses one request after another, each in the
    same line the samples caught); False where the process had no window."""
    raw = raw_window(snap, proc)
    thread = next((t for t in raw.threads if t.tid == tid), None) if raw is not None else None
    if thread is None:
        return False
    inside = f"{call.name} ("
    return sum(s.count for s in thread.stacks
               if not any(f.startswith(inside) for f in s.frames)) >= MIN_MOVED_SAMPLES


#: A thread's category while it runs on CPU (the spin of a call that polls included).
_ON_CPU = frozenset({Category.RUNNING, Category.SPIN})


@per_stack
def _in_coroutine(frames: tuple[Frame, ...]) -> bool:
    """A stack inside a coroutine or callback its asyncio loop runs (not the loop's own wait)."""
    return bool(loop_at(own_python(frames)))


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
