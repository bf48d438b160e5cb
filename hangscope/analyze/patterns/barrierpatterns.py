"""The wait-for graph's short barrier: threads wait in ``threading.Barrier.wait`` and no other
thread of their process is left that could arrive.

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph). A ``threading.Barrier(n)``
trips when its n-th party calls ``wait()``; its parties are threads of one process. When the
threads that wait in it are all that is left of the process (every other thread joins them,
waits to be notified itself, or is a helper), the party it still needs never comes: a thread
that died before it reached the barrier (threading's "Exception in thread NAME" in the output
names it), or a barrier made for more parties than the threads started. Unlike an Event, no
program idles in a barrier on purpose, so this holds with or without a death on record.
"""

from __future__ import annotations

from hangscope.analyze.graph.barriercalls import called_method, in_call_barrier
from hangscope.analyze.graph.threadedges import blocked, joins, user_frame
from hangscope.analyze.graph.waitwalk import (
    Graph,
    hops_into,
    site_words,
    thread_names,
    waits_into,
)
from hangscope.analyze.patterns.behind import collective_behind
from hangscope.analyze.patterns.threadpatterns import (
    could_produce,
    died_threads,
    notified_wait,
    program_threads,
)
from hangscope.frameworks.producers import between_tasks
from hangscope.model import Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who


def _in_barrier(thread: Thread) -> bool:
    frame = notified_wait(thread)
    return frame is not None and frame.name.rsplit(".", 2)[-2:] == ["Barrier", "wait"]


def _rest(proc: Process, others: list[Thread]) -> str:
    joiners = [t for t in others if joins(t)]
    if not others:
        return "no other thread of it is left"
    if joiners:
        return (f"no other thread of it is left to arrive ({thread_names(joiners)} "
                f"{'joins' if len(joiners) == 1 else 'join'} them)")
    return "no other thread of it is left to arrive"


def barrier_short(g: Graph) -> WaitPattern | None:
    """Threads of one process wait in a Barrier that none of its other threads can reach."""
    if not g.has_file("threading.py"):
        return None
    for proc in g.snap.processes:
        if proc.is_exited or not proc.threads:
            continue
        threads = program_threads(proc)
        parties = sorted((t for t in threads if _in_barrier(t) and blocked(t)),
                         key=lambda t: t.tid)
        if not parties:
            continue
        others = [t for t in threads if t not in parties]
        if any(could_produce(t) for t in others):
            continue  # a thread that runs or waits on something else may still arrive
        inner = user_frame(parties[0])
        site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
        live = {t.name for t in proc.threads}
        died = [n for n in died_threads(proc) if n not in live]
        verb = "waits" if len(parties) == 1 else "wait"
        chain = (f"{thread_names(parties)} of {who(proc)} {verb} in threading.Barrier.wait{site} "
                 f"for the barrier's other parties, and {_rest(proc, others)}: the party it "
                 "still needs never comes")
        chain += (f"; its output says thread {', '.join(died[:3])} died of an exception "
                  "(threading's 'Exception in thread' traceback) before it reached the "
                  "barrier" if died else
                  "; no thread's death is in its output: the barrier was made for more "
                  "parties than the threads that reach it")
        waiters, into = waits_into(g, proc.pid)
        if into:
            chain += hops_into(g, into) + collective_behind(g, waiters)
        chain += ("; give Barrier.wait() a timeout, and call barrier.abort() when a party "
                  "fails, so the others get BrokenBarrierError instead of waiting for ever")
        return WaitPattern("barrier_short", (proc.pid, *waiters), chain, tuple(into),
                           proc.pid, parties[0].tid)
    return None


def uncalled_barrier_end(g: Graph, edge: int) -> str:
    """How a chain ends at a consumer that a producer's barrier of calls waits for
    (analyze/graph/barriercalls.py): it idles between tasks, or does something else, and never
    makes the call; and the framework's words on why that holds the others. "" otherwise."""
    last = g.edges[edge]
    barrier = g.threads.get((last.pid, last.tid))
    wait = in_call_barrier(barrier)
    end = g.procs.get(last.to_pid or 0)
    if wait is None or barrier is None or end is None or last.kind != "object":
        return ""
    thread = end.working_thread
    doing = "is between tasks" if between_tasks(end) else "is elsewhere"
    method = called_method(barrier.frames) or "the call"
    words = wait.call_barrier_words
    return (f"; {who(end)} {doing}{site_words(thread)}: it never called {method} for this "
            f"round. {words[:1].upper()}{words[1:]}")
