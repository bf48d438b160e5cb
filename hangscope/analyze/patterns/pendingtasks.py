"""Tasks nobody runs: a get waits for plain tasks' results while every worker is idle.

A thread blocked in a framework's get on objects no known producer owes (Ray's ``ray.get`` on
plain tasks: any worker may run one) waits for whichever worker runs such a task
(analyze/graph/objectedges.py's probable edges). When no worker runs one (each of the
framework's workers is in its loop for the next task: idle actors, idle pool workers), the
tasks are not running anywhere: the framework's scheduler holds them, pending on what it needs
first (Ray: free resources, which live actors hold). The waiter is the suspect: its get can
only end once the job makes room, and the framework's own words (``ObjectWait.pending``) say
how (ray#2541, ray#15594). Where a log of the job says the request is one no node can ever
meet (``ObjectWait.infeasible``: Ray's autoscaler, ray#45909), that is said instead; where no
worker is held by anything (all Ray's idle pool), no actor holds the resources, and what the
wait needs cannot be placed as asked (``ObjectWait.unheld``: a placement group, ray#27287).

Nested: the workers that are not idle each wait in a get of their own, a task waiting for the
tasks it submitted, and none computes: those tasks are pending too, on what the waiting ones
hold (Ray gives a task blocked in ``ray.get`` its CPU back, not its GPUs or custom resources:
ray#5790, ray#25239; ``ObjectWait.nested``). The first such task is the suspect.
"""

from __future__ import annotations

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.working import progressing_pids, starting_workers
from hangscope.analyze.graph.objectedges import object_wait
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.frameworks import OBJECT_WAITS, ObjectWait, does_work
from hangscope.frameworks.producers import between_tasks
from hangscope.model import Process, Role
from hangscope.model.waits import WaitPattern
from hangscope.words import who_list


def pending_tasks(g: Graph) -> WaitPattern | None:
    if not any(g.has_file(path) for wait in OBJECT_WAITS for _, path in wait.waits):
        return None  # no stack is in a framework's get: nothing here (the scan is per rank)
    procs = [p for p in g.snap.processes if not p.is_exited]
    workers = [p for p in procs if does_work(p.title) and p.role not in HELPER_ROLES]
    # A worker that hosts an actor runs that actor's methods only (its own log says which):
    # it runs no plain task, whatever it does (Ray Train's workers, in their training loop).
    hosts = {h.pid for h in g.snap.waits.hosted} if g.snap.waits is not None else set()
    free = [p for p in workers if p.pid not in hosts]
    # Every other worker idle between tasks, or waiting for objects itself (a nested get: the
    # tasks it submitted are pending on what it holds)
    going = progressing_pids(g.snap)
    nested = [p for p in free if not between_tasks(p) and _plain_get(g, p)
              and p.pid not in going and (t := p.working_thread) is not None
              and t.state != "R"]
    if not workers or not all(between_tasks(p) or p in nested for p in free):
        return None
    if starting_workers(g.snap):
        return None  # the scheduler started a worker during the dump: it will run them
    if nested:
        return _nested(g, nested, [p for p in free if p not in nested])
    for proc in sorted(procs, key=_for_ever_first):
        found = object_wait(proc)
        thread = proc.working_thread
        if found is None or thread is None or proc in free or _named_producer(g, proc):
            continue  # (an edge to a named producer: the actor it waits on is known)
        _, wait = found
        unheld = bool(wait.unheld) and all(p.title == wait.unheld_title for p in workers)
        why = _infeasible(g, wait) or (wait.unheld if unheld else wait.pending)
        shown = sorted(free or workers, key=_ranks_first)
        named = who_list(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")
        them = (f"{named} {'is' if len(free) == 1 else 'are'} idle between calls" if free else
                f"every worker hosts an actor and runs its methods only ({named})")
        chain = (f"{thread_words(proc, thread)} waits{site_words(thread)} for results of "
                 f"tasks, and no worker here runs one: {them}. Unless another node runs "
                 "them, the tasks are pending in the scheduler, not running"
                 + (f": {why}" if why else ""))
        return WaitPattern("pending_tasks", (proc.pid, *(p.pid for p in shown)), chain, (),
                           proc.pid, thread.tid)
    return None


def _for_ever_first(proc: Process) -> tuple[bool, int]:
    """Waiters whose own line calls the get with no timeout first (``Frame.untimed``: it
    returns only with its objects), then by PID: a framework's own poll with a timeout (Ray
    Train's controller, ``ray.wait(polls, timeout=...)`` on its workers' health) may be caught
    inside its wait, and it is no waiter the job hangs on."""
    thread = proc.working_thread
    return (thread is None or not any(f.untimed for f in thread.frames), proc.pid)


def _plain_get(g: Graph, proc: Process) -> bool:
    """A plain task (its title names no actor's method) waiting in a get for objects no known
    producer owes (no sure edge to an actor): results of tasks."""
    found = object_wait(proc)
    return found is not None and not (
        found[1].method is not None and found[1].method.match(proc.title or "")) and not (
        _named_producer(g, proc))


def _named_producer(g: Graph, proc: Process) -> bool:
    """A sure object edge leaves ``proc``: the producer it waits on (an actor) is known."""
    return any(g.edges[i].kind == "object" and not g.edges[i].probable
               for i in g.out.get(proc.pid, ()))


def _nested(g: Graph, nested: list[Process], idle: list[Process]) -> WaitPattern | None:
    """Tasks that wait in a get for tasks they submitted, nobody running any (module doc)."""
    first = nested[0]
    found = object_wait(first)
    thread = first.working_thread
    if found is None or thread is None or not found[1].nested:
        return None
    waiters = [p for p in g.snap.processes if not p.is_exited and p not in nested
               and object_wait(p) is not None and p.role not in HELPER_ROLES]
    others = f" ({who_list(nested[1:])} the same)" if nested[1:] else ""
    rest = (f", and {who_list(idle[:4])} {'is' if len(idle) == 1 else 'are'} idle between "
            "tasks" if idle else "")
    behind = (f" ({who_list(waiters[:3])} wait{'s' if len(waiters) == 1 else ''} on them)"
              if waiters else "")
    words = found[1].nested
    chain = (f"{thread_words(first, thread)}, a task, waits{site_words(thread)} for results of "
             f"tasks it submitted{others}, and no worker runs one: each busy worker waits in a "
             f"get of its own{rest}, so the tasks they wait for are pending in the scheduler"
             f"{behind}. {words[:1].upper()}{words[1:]}")
    return WaitPattern("pending_tasks", (first.pid, *(p.pid for p in nested[1:]),
                                         *(p.pid for p in waiters)), chain, (), first.pid,
                       thread.tid, also=tuple(p.pid for p in nested[1:]))


def _ranks_first(proc: Process) -> tuple[bool, bool, int, int]:
    """Ranks first, in rank order (PIDs say nothing of it), then the other workers by PID."""
    rank = proc.rank.global_rank if proc.rank is not None else None
    return (proc.role is not Role.RANK, rank is None, rank or 0, proc.pid)


def _infeasible(g: Graph, wait: ObjectWait) -> str:
    """The framework's words for a request no node can meet, where a log of the job has the
    line that says so (the last such line); "" where none does."""
    if wait.infeasible is None:
        return ""
    for proc in g.snap.processes:
        for line in reversed((*proc.log_errors, *proc.log_tail)):
            if (found := wait.infeasible.search(line)) is not None:
                return wait.infeasible_words.format(ask=found["ask"])
    return ""
