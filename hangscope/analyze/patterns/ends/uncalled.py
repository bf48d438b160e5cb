"""A call nobody makes: a thread waits for a producer's method (a Ray actor's ``get`` on its
queue) that awaits another call to the producer (a ``put``), and no live process of the job is
making one.

A framework's producer that runs its methods as coroutines on its own event loops (Ray's async
actors: ``AsyncIO Thread: default``) has a method in flight (its title names it) while every
one of its loops idles in its select: the method awaits something only another call (or an
outside event) brings. When every other worker of the framework is idle between tasks or
itself waits for objects, and no process of the job computes, no such call is coming: the
producer of the items is gone (a failed task keeps its exception in its ObjectRef, logged
nowhere: ray#19416, ray#6612). The suspect is the waiter, at its own line: its get has no
timeout and nothing will end it.

A call queued behind the one in flight: the waiter's own line submitted another method to the
producer (``ray.get(gate.release.remote(who))``, ``Frame.submits``) than the one its title
says runs (``acquire``), which awaits while its loops idle. The call is made; it waits in the
producer's queue behind a method that holds the producer's concurrency and waits for it
(linagora/openrag#965: a semaphore actor whose waiting acquires hold every slot, so the
release never runs). The producer is the suspect.

A call queued behind a method that loops: the waiter's line submitted a method to a producer
that runs one call at a time (a plain Ray actor, ``max_concurrency=1``), whose one thread runs
another method (its title names it) whose own line stands in a ``while`` loop (``Frame.
loop_kind``): a poll loop written as a method (``def run(self): while True: task =
ray.get(store.next.remote())``). The call waits in the producer's queue until that method
returns, however busy the loop is: the producer's work (and whatever it waits on) is no
progress of the call. The producer is the suspect, at its loop (Ray's "Using asyncio to run
actor methods concurrently": a long-polling method blocks every later call).

A call queued behind a constructor: the producer is still in its constructor (its title names
``__init__``), blocked, and the framework runs none of its methods until the constructor
returns (a Ray actor's ``__init__`` that waits for an Event only its own ``configure`` sets:
ray#7379). Whatever the waiter asked of it waits in its queue for ever; the producer is the
suspect, at the constructor's wait.
"""

from __future__ import annotations

from collections.abc import Iterator

from hangscope.analyze.evidence.facts import blocked
from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.working import QUEUED_BEHIND, progressing_pids
from hangscope.analyze.graph.objectedges import (
    awaiting_call,
    callers,
    looping_method,
    submitted,
)
from hangscope.analyze.graph.threadedges import own_frame
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.frameworks import OBJECT_WAITS, ObjectWait, does_work
from hangscope.frameworks.producers import between_tasks
from hangscope.model import Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who, who_list


def constructing(g: Graph) -> WaitPattern | None:
    """A waiter for an object of a producer whose constructor is blocked (module doc)."""
    going = progressing_pids(g.snap)
    for i, edge in enumerate(g.edges):
        if edge.kind != "object" or edge.probable or edge.to_pid is None:
            continue
        host, waiter = g.procs.get(edge.to_pid), g.procs.get(edge.pid)
        found = _in_constructor(host) if host is not None and not host.is_exited else None
        if found is None or waiter is None or host is None or host.pid in going:
            continue  # (a constructor that computes, loading weights: slow, not this)
        wait, actor, ctor = found
        thread = next((t for t in waiter.threads if t.tid == edge.tid), None)
        asked = " and ".join(submitted(thread))
        others = [t for t in host.threads if t.tid != ctor.tid and t.python and not t.helper
                  and blocked(t) and own_frame(t) is not None]
        also = "".join(f"; its thread {t.name or t.tid} waits{site_words(t)}"
                       for t in others[:3])
        chain = (f"{thread_words(waiter, thread)} waits{site_words(thread)} for {who(host)} "
                 f"to run {asked or 'a method'}{', which it submitted' if asked else ''}; "
                 f"{who(host)} is still in its constructor, {actor}.{wait.constructor}, which "
                 f"does not return: it waits{site_words(ctor)}{also}. "
                 + wait.constructing[:1].upper() + wait.constructing[1:])
        return WaitPattern("queued_init", (host.pid, waiter.pid), chain, (i,), host.pid,
                           ctor.tid)
    return None


def behind_loop(g: Graph) -> WaitPattern | None:
    """A waiter for a method queued behind one that loops (module doc)."""
    for i, edge in enumerate(g.edges):
        if edge.kind != "object" or QUEUED_BEHIND not in edge.how or edge.to_pid is None:
            continue  # (the object edges say where a call is queued: objectedges._behind)
        host, waiter = g.procs.get(edge.to_pid), g.procs.get(edge.pid)
        found = looping_method(host) if host is not None and not host.is_exited else None
        if found is None or waiter is None or host is None:
            continue
        thread = next((t for t in waiter.threads if t.tid == edge.tid), None)
        asked = submitted(thread)
        wait, running, frame = found
        methods = " and ".join(asked)
        span = (f" (lines {frame.loops[-1][0]}-{frame.loops[-1][1]})" if frame.loops else "")
        chain = (f"{thread_words(waiter, thread)} waits{site_words(thread)} for {who(host)} "
                 f"to run {methods}, which it submitted, queued behind {running}: {who(host)} "
                 f"runs one call at a time, and {running} stands in a while loop{span} at "
                 f"{frame.name} ({frame.short_file}:{frame.line}): {methods} starts only "
                 f"once {running} returns, however busy its loop is. " + wait.looping[:1].upper()
                 + wait.looping[1:])
        return WaitPattern("queued_loop", (host.pid, waiter.pid), chain, (i,), host.pid,
                           host.working_tid)
    return None


def _in_constructor(host: Process) -> tuple[ObjectWait, str, Thread] | None:
    """The framework's wait, the producer's name and the thread blocked inside its
    constructor, where its title says the constructor runs."""
    for wait in OBJECT_WAITS:
        found = wait.method.match(host.title or "") if wait.method is not None else None
        if found is None or wait.constructor is None or found.group(
                "method") != wait.constructor or wait.method_frame is None:
            continue
        actor = found.groupdict().get("actor") or wait.producer_word
        name = f"{actor}.{wait.constructor}"
        for thread in host.threads:
            frames = [f for f in thread.frames if not f.native]
            k = next((k for k, f in enumerate(frames) if f.name == name), None)
            if k is not None and blocked(thread) and any(
                    f.name.endswith(wait.method_frame[0]) and (f.file or "").endswith(
                        wait.method_frame[1]) for f in frames[k + 1:]):
                return wait, actor, thread
    return None


def uncalled(g: Graph) -> WaitPattern | None:
    if not any(w.loop_threads for w in OBJECT_WAITS):
        return None
    awaited = list(_awaited(g))
    return next(filter(None, (_queued(*a) for a in awaited)), None) or next(
        filter(None, (_uncalled(g, *a) for a in awaited)), None)


#: One object wait on a producer whose method in flight awaits: (edge index, the waiter, its
#: thread, the producer, the framework's wait, the method in flight).
Awaited = tuple[int, Process, Thread | None, Process, ObjectWait, str]


def _awaited(g: Graph) -> Iterator[Awaited]:
    """Each sure object edge to a live producer whose method in flight awaits another call."""
    for i, edge in enumerate(g.edges):
        if edge.kind != "object" or edge.probable or edge.to_pid is None:
            continue
        host, waiter = g.procs.get(edge.to_pid), g.procs.get(edge.pid)
        found = (awaiting_call(host, g.snap.waits.kernel if g.snap.waits is not None else None)
                 if host is not None and not host.is_exited else None)
        if found is None or waiter is None or host is None:
            continue
        thread = next((t for t in waiter.threads if t.tid == edge.tid), None)
        yield i, waiter, thread, host, *found


def _queued(i: int, waiter: Process, thread: Thread | None, host: Process, wait: ObjectWait,
            running: str) -> WaitPattern | None:
    """A waiter whose own line submitted a method other than the producer's in flight."""
    asked = submitted(thread)
    if not wait.queued or not asked or running in asked:
        return None
    methods = " and ".join(asked)
    chain = (f"{thread_words(waiter, thread)} waits{site_words(thread)} for {who(host)} to "
             f"run {methods}, which it submitted, queued behind {running}: {who(host)} has "
             f"{running} in flight and its event loop idles, so {running} awaits, and "
             f"{methods} cannot start while it holds the actor. "
             + wait.queued[:1].upper() + wait.queued[1:])
    return WaitPattern("queued_call", (host.pid, waiter.pid), chain, (i,), host.pid)


def _uncalled(g: Graph, i: int, waiter: Process, thread: Thread | None, host: Process,
              wait: ObjectWait, method: str) -> WaitPattern | None:
    # Every other process idles between tasks or waits for objects itself: none could
    # be the one to call the producer (with one, the graph's edges lead to it).
    if callers(g.snap, host.pid):
        return None
    idle = [p for p in g.snap.processes if not p.is_exited and p.role not in HELPER_ROLES
            and p.pid != host.pid and does_work(p.title) and between_tasks(p)]
    rest = (f"; {who_list(idle)} {'is' if len(idle) == 1 else 'are'} idle between tasks"
            if idle else "")
    chain = (f"{thread_words(waiter, thread)} waits{site_words(thread)} for {who(host)} "
             f"to return its {method}, and {method} awaits another call to it that no "
             f"live process of the job is making: its event loop idles with {method} in "
             f"flight, and every other process waits or has no task{rest}. "
             + wait.uncalled[:1].upper() + wait.uncalled[1:] + _own(host, wait))
    return WaitPattern("uncalled", (waiter.pid, host.pid, *(p.pid for p in idle)), chain,
                       (i,), waiter.pid, thread.tid if thread is not None else None)


def _own(host: Process, wait: ObjectWait) -> str:
    """The self-call cause, where the producer is the program's own (its name, from the
    title, starts with no underscore: not one of the framework's own producers)."""
    found = wait.method.match(host.title or "") if wait.method is not None else None
    actor = found.groupdict().get("actor") if found is not None else None
    if not wait.self_call or not actor or actor.startswith("_"):
        return ""
    return ". " + wait.self_call[:1].upper() + wait.self_call[1:]
