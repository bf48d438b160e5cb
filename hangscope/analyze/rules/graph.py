"""Verdict rules from the wait-for graph's patterns (analyze/patterns/waitpatterns.py).

Each rule reads ``facts.snapshot.wait_graph`` and states the pattern's chain in one sentence,
with its suspect, the edges and the per-subject lines as evidence; rules.py places the rows
in the table.
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import GONE, Facts
from hangscope.analyze.evidence.working import (
    chain_to_work,
    in_traffic,
    progressing_pids,
    work_words,
)
from hangscope.analyze.graph.threadedges import user_frame
from hangscope.analyze.graph.zmqedges import receive_edge
from hangscope.analyze.patterns.threadpatterns import notified_wait
from hangscope.analyze.rules.subject_lines import evidence
from hangscope.model import Category, Process, Severity, Snapshot, Thread, Verdict, VerdictKind
from hangscope.model.waits import WaitGraph, WaitPattern
from hangscope.words import describe, who

_HEAD = {"cycle": "Deadlock", "lock_ring": "Local deadlock",
         "gil_hold": "GIL held in a blocking call",
         "fork_lock": "Deadlock (a lock inherited locked across fork)",
         "self_lock": "Deadlock (a thread waits for itself)",
         "self_wait": "Deadlock (an event loop waits for itself)",
         "callback_self_wait": "Deadlock (a callback waits for the thread that runs it)",
         "own_end": "Deadlock (a reader holds the other end itself)",
         "orphan_wait": "A wait nobody can end",
         "barrier_short": "A barrier that cannot trip",
         "leaked_permits": "Leaked semaphore permits",
         "full_queue": "A full queue nobody drains",
         "event_loop": "Event loop blocked", "lost_result": "A result nobody computes",
         "loop_sync_wait": "Event loop blocked in a synchronous wait",
         "loop_on_cpu": "Event loop blocked on CPU",
         "prompt": "A prompt nobody answers", "sink": "Wait chain",
         "lost_reply": "A reply that never comes",
         "fifo_open": "A FIFO nobody opens", "lost_wakeup": "A lost wake-up",
         "pool_saturated": "Pool saturated", "pool_starved": "A pool starved by its own tasks",
         "pending_tasks": "Tasks nobody runs", "unserved_call": "A call no server runs",
         "uncalled": "A call nobody makes",
         "queued_call": "A call queued behind its own wait",
         "queued_init": "A call queued behind a constructor that never returns",
         "queued_loop": "A call queued behind a method that loops",
         "unconnected_call": "A call connected to no server",
         "unconnected_zmq": "A zmq socket connected to nothing",
         "dead_thread": "A thread died", "crash_loop": "Crash loop",
         "dead_process": "A process died", "dead_holder": "A lock whose holder died",
         "dead_peer": "A peer died",
         "forked_context": "Sockets of a zmq context inherited across fork",
         "overbooked_pool": "A server's pool full of calls that never end",
         "nested_checkout": "Deadlock (a pool emptied by nested checkouts)",
         "signal_blocked": "A signal never delivered", "signal_ignored": "A signal ignored",
         "self_connect": "Deadlock (a socket connected to itself)",
         "self_call": "Deadlock (a pool that calls its own server)",
         "pool_cycle": "Deadlock (pools that call each other's servers)",
         "rpc_pools": "Deadlock (RPC threads all waiting on nested calls)",
         "tty_stopped": "A terminal's output stopped (^S)",
         "shared_connection": "One connection shared across fork",
         "behind_sibling": "Behind its siblings"}
_KIND = {"cycle": VerdictKind.DEADLOCK, "gil_hold": VerdictKind.DEADLOCK,
         "fork_lock": VerdictKind.DEADLOCK, "self_lock": VerdictKind.DEADLOCK,
         "self_wait": VerdictKind.DEADLOCK, "own_end": VerdictKind.DEADLOCK,
         "callback_self_wait": VerdictKind.DEADLOCK,
         "nested_checkout": VerdictKind.DEADLOCK, "self_connect": VerdictKind.DEADLOCK,
         "self_call": VerdictKind.DEADLOCK, "pool_cycle": VerdictKind.DEADLOCK,
         "rpc_pools": VerdictKind.DEADLOCK,
         "tty_stopped": VerdictKind.WAIT_CHAIN, "shared_connection": VerdictKind.DEADLOCK}


def edge_lines(graph: WaitGraph, pattern: WaitPattern) -> tuple[str, ...]:
    """One evidence line per edge of the chain: who waits for whom, on what, known how."""
    lines = []
    for i in pattern.edges:
        e = graph.edges[i]
        to = (f"PID {e.to_pid}" + (f" thread {e.to_tid}" if e.to_tid else "")
              if e.to_pid is not None else e.outside or "outside the job")
        lines.append(f"wait-for: PID {e.pid} thread {e.tid} -> {to}: {e.object} "
                     f"({'probable; ' if e.probable else ''}{e.how})")
    return tuple(lines)


def _suspects(facts: Facts, graph: WaitGraph, pattern: WaitPattern) -> tuple[int, ...]:
    """The pattern's suspect; a chain that ends at a pipe or FIFO with several live
    processes holding the other end: every one of them (any could be the one that never
    writes or closes it)."""
    if pattern.suspect is None:
        return ()
    if pattern.also:  # the pattern names more than one (both ends of a lock ring, ...)
        return tuple(dict.fromkeys((pattern.suspect, *pattern.also)))
    if pattern.kind == "pool_saturated":  # every worker holds a task that waits: all of them
        return pattern.members[:-1]
    if pattern.kind != "sink" or not pattern.edges:
        return (pattern.suspect,)
    last = graph.edges[pattern.edges[-1]]
    if last.kind not in ("pipe", "fifo") or last.to_pid != pattern.suspect:
        return (pattern.suspect,)
    live = {p.pid for p in facts.processes if not p.is_exited}
    holders = [e.to_pid for e in graph.edges if (e.pid, e.tid, e.object)
               == (last.pid, last.tid, last.object) and e.to_pid in live and e.to_pid != e.pid]
    return tuple(dict.fromkeys([pattern.suspect, *(pid for pid in holders if pid is not None)]))


def _fed(snap: Snapshot, graph: WaitGraph, going: frozenset[int]) -> set[int]:
    """The processes in a wait that any one of several peers ends, one of which the window saw
    progress or waits, edge by edge, on one that did: a zmq receive returns with the first
    message from any peer (analyze/graph/zmqedges.py draws an edge to each), and a read of a
    pipe that several processes write returns with any one's write. A ring through another of
    them (a worker waiting for its next step; a DataLoader worker waiting for its next index
    while its sibling reads the records a slow decoder puts) is no deadlock while one works
    on the answer (an engine waiting on a worker that computes a long step)."""
    fed = {e.pid for e in graph.edges if e.to_pid in going and e.to_pid != e.pid
           and receive_edge(e)}
    writers: dict[tuple[int, int, str], set[int]] = {}
    for e in graph.edges:
        if e.kind in _ANY_WRITER and e.to_pid is not None and e.to_pid != e.pid:
            writers.setdefault((e.pid, e.tid, e.object), set()).add(e.to_pid)
    works: dict[int, bool] = {}
    for (pid, _, _), pids in writers.items():
        if pid in fed or len(pids) < 2:
            continue
        for other in sorted(pids):
            if other not in works:
                works[other] = other in going or chain_to_work(snap, other) is not None
            if works[other]:
                fed.add(pid)
                break
    return fed


#: Waits that any one of the processes holding the other end ends (a write, a close).
_ANY_WRITER = frozenset({"pipe", "fifo"})


#: Patterns whose suspect may work the whole window: a producer busy in a method that loops
#: holds the call queued behind it however much it does.
_WORKS_ANYWAY = frozenset({"queued_loop", "loop_on_cpu"})
#: Patterns that judge their members' work themselves: a lost reply's backends may move
#: their lines polling for work on next to no CPU (ends/lostreplies.py ``_idle``).
_JUDGED_IDLE = frozenset({"lost_reply"})


def _verdict(facts: Facts, kinds: tuple[str, ...],
             edge_kinds: frozenset[str] | None = None) -> Verdict | None:
    graph = facts.snapshot.wait_graph
    if graph is None:
        return None
    # A chain through a process the window saw progress (a Ray actor that computes, not a
    # subject itself) waits for work being done: no hang (analyze/rules/slow.py says so).
    going = progressing_pids(facts.snapshot)
    moving = ({pid for _, pid in facts.moving} | going | _fed(facts.snapshot, graph, going)
              | in_traffic(facts.snapshot, going))
    for pattern in graph.patterns:
        # (a suspect that works by design: its work is no progress of the call queued on it)
        members = [pid for pid in pattern.members
                   if pattern.kind not in _WORKS_ANYWAY or pid != pattern.suspect]
        if pattern.kind not in kinds or (pattern.kind not in _JUDGED_IDLE
                                         and moving.intersection(members)):
            continue
        if edge_kinds is not None and edge_kinds.isdisjoint(
                graph.edges[i].kind for i in pattern.edges):
            continue
        chain = pattern.chain[:1].upper() + pattern.chain[1:] + _spinning(facts, pattern)
        suspects = _suspects(facts, graph, pattern)
        return Verdict(_KIND.get(pattern.kind, VerdictKind.WAIT_CHAIN), Severity.CRITICAL,
                       f"{_HEAD[pattern.kind]}: {chain}.", suspects,
                       (*edge_lines(graph, pattern), *evidence(facts)))
    return None


def lock_ring(facts: Facts, pid: int) -> tuple[list[tuple[int, str, str, str]], int] | None:
    """The threads of ``pid`` in a lock-order cycle (analyze/patterns/waitpatterns.py
    ``lock_ring``):
    (tid, the lock it holds, the lock it takes, where) each, and how many threads wait behind
    them; None without one."""
    graph = facts.snapshot.wait_graph
    pattern = next((p for p in graph.patterns if p.kind == "lock_ring" and p.suspect == pid),
                   None) if graph is not None else None
    if graph is None or pattern is None:
        return None
    edges = [graph.edges[i] for i in pattern.edges]
    out = []
    for edge in edges:
        wants, _, site = edge.object.partition(" (taken at ")
        holds = [e.object.partition(" (taken at ")[0] for e in edges if e.to_tid == edge.tid]
        out.append((edge.tid, ", ".join(holds), wants, site[:-1]))
    tids = {e.tid for e in edges}
    behind = {e.tid for e in graph.edges if e.kind == "py_lock" and e.pid == pid
              and e.to_tid in tids and e.tid not in tids}
    return out, len(behind)


def wait_cycle(facts: Facts) -> Verdict | None:
    """Following each stuck thread's wait comes back to it: a deadlock. A sibling behind the
    others comes first: the ring through their shared sockets is how they wait for the message
    it never got, and it says which one is out; unless that one's sockets are connected to
    nothing at all (the kernel says why no message reaches it)."""
    return _verdict(facts, ("self_connect", "self_call", "pool_cycle", "rpc_pools", "tty_stopped",
                            "own_end", "unconnected_zmq",
                            "behind_sibling",
                            "cycle", "gil_hold",
                            "self_lock", "self_wait", "callback_self_wait", "fork_lock",
                            "nested_checkout",
                            "shared_connection"))


def wait_shape(facts: Facts) -> Verdict | None:
    """A wait nobody can end (a dead producer, a barrier short of a party, leaked permits, a
    lost wake-up), a blocked event loop, a lost pool result, a saturated pool, or an
    unanswered prompt."""
    return _verdict(facts, ("orphan_wait", "barrier_short", "leaked_permits", "full_queue",
                            "lost_wakeup", "event_loop", "loop_on_cpu", "loop_sync_wait",
                            "lost_result",
                            "pool_saturated", "overbooked_pool",
                            "pool_starved", "pending_tasks", "unserved_call", "queued_call",
                            "queued_init", "queued_loop", "uncalled", "prompt", "unconnected_call",
                            "lost_reply",
                            "fifo_open", "dead_holder", "dead_peer", "forked_context",
                            "signal_blocked", "signal_ignored"))


def lock_holder(facts: Facts) -> Verdict | None:
    """Threads wait for a Python lock or the GIL that one thread holds while it waits elsewhere."""
    return _verdict(facts, ("sink",), frozenset({"py_lock", "gil"}))


def wait_sink(facts: Facts) -> Verdict | None:
    """Everything waits, transitively, on one thread that waits on nothing in the job."""
    return _verdict(facts, ("sink",))


def crash_looping(facts: Facts) -> Verdict | None:
    """Children die as they start and are started again (before the missing-rank rule: the
    ranks it would call exited are the loop's latest victims)."""
    return _verdict(facts, ("crash_loop",))


def thread_died(facts: Facts) -> Verdict | None:
    """A thread or a process died (a zombie with its traceback, or one a waiter's log names)
    and the job polls or waits for what it would have done (after the chains: a wait the
    graph follows says more than a traceback)."""
    return _verdict(facts, ("dead_thread", "dead_process"))





def held_across_wait(facts: Facts, proc: Process,
                     locked: list[Thread]) -> tuple[Thread, str, list[Thread]] | None:
    """The thread that holds the lock every one of ``locked`` waits for, where it is not
    itself waiting for a lock but for something else (an Event, a Condition, a reply) inside
    the block that holds it: (that thread, the lock, the threads that wait for it). Not a lock
    order inversion, which the source would show as a ring: a lock held across a wait."""
    graph = facts.snapshot.wait_graph
    if graph is None:
        return None
    tids = {t.tid for t in locked}
    edges = [e for e in graph.edges if e.kind == "py_lock" and e.pid == proc.pid
             and e.tid in tids and e.to_pid == proc.pid and e.to_tid is not None]
    holders = {e.to_tid for e in edges}
    if len(holders) != 1 or {e.tid for e in edges} != tids:
        return None
    holder = next((t for t in proc.threads if t.tid in holders), None)
    if holder is None or holder.tid in tids or notified_wait(holder) is None or any(
            e.kind == "py_lock" and e.tid == holder.tid for e in graph.edges):
        return None  # a holder blocked on I/O or a child: the chain through it says more
    lock = edges[0].object.partition(" (taken at ")[0]
    return holder, lock, locked


def waits_in(thread: Thread) -> str:
    """``Event.wait (threading.py:629)``: the call the program made to wait (the frame just
    inside its own, not the Condition plumbing beneath it)."""
    python = [f for f in thread.frames if not f.native]
    mine = user_frame(thread)
    at = python.index(mine) if mine in python else 0
    call = python[at - 1] if at > 0 else (python[0] if python else None)
    return f"{call.name} ({call.location})" if call is not None else (thread.site or "?")


def thread_sites(threads: list[Thread], shown: int = 6) -> str:
    """``loader at Catalogue.load (x.py:9), reader-0 at ...``: the first ``shown`` threads."""
    names = ", ".join(f"{t.name or t.tid} at {t.site or '?'}" for t in threads[:shown])
    return names + (f", and {len(threads) - shown} more" if len(threads) > shown else "")


def waiting_for(facts: Facts, proc: Process) -> str:
    """``; ranks 0-1 wait in all_reduce for it``: the job's groups outside ``proc``."""
    return "".join(f"; {describe(g, facts.is_rank)} for it" for g in facts.groups
                   if proc.key not in g.keys and g.category not in GONE)


def held_verdict(facts: Facts, proc: Process, held: tuple[Thread, str, list[Thread]]) -> Verdict:
    """The verdict of :func:`held_across_wait`: the holder, its wait, the lock, its waiters."""
    holder, lock, waiters = held
    summary = (f"A lock held across a wait in {who(proc)}: thread {holder.name or holder.tid} "
               f"waits in {waits_in(holder)} at {holder.site or '?'} inside a block that holds "
               f"{lock}, and {len(waiters)} thread{'s wait' if len(waiters) > 1 else ' waits'} "
               f"for that lock ({thread_sites(waiters)}){waiting_for(facts, proc)}. Whatever "
               "would end its wait cannot take "
               "the lock: release it before waiting (Condition.wait releases its own lock, "
               "Event.wait does not).")
    lines = (f"thread {holder.name or holder.tid} (tid {holder.tid}): holds {lock}, waits in "
             f"{waits_in(holder)}, wchan {holder.wchan or '?'}",
             *(f"thread {t.name or t.tid} (tid {t.tid}): {t.category} at {t.site}, "
               f"wchan {t.wchan or '?'}" for t in waiters))
    return Verdict(VerdictKind.LOCAL_DEADLOCK, Severity.CRITICAL, summary, (proc.pid,), lines,
                   (proc.host,))


def _spinning(facts: Facts, pattern: WaitPattern) -> str:
    """``; PID 9 (writer) spins on CPU at enqueue (x.py:43), its stack unchanged: a busy wait,
    not work``: a process outside the pattern that burns CPU in one place while the job is
    stuck (a shared-memory ring's writer polling a slot the stuck reader never frees). Its
    CPU says nothing of progress; saying so keeps a reader from taking it for the cause."""
    out = []
    for proc in facts.processes:
        working = proc.working_thread
        if proc.pid in pattern.members or proc.is_exited or working is None or \
                proc.category not in (Category.RUNNING, Category.SPIN) or not working.stuck or \
                work_words(facts.snapshot, proc, facts.progress.get(proc.key)):
            continue
        cpu = f" ({proc.cpu_percent:.0f}% CPU)" if proc.cpu_percent is not None else ""
        out.append(f"{who(proc)} spins on CPU at {working.site or '?'}{cpu}, its stack "
                   "unchanged: a busy wait on what the stuck ones hold, not work")
    return "".join(f"; {line}" for line in out[:2])

