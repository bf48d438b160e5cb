"""The patterns of the wait-for graph, each with its suspect and the chain in one sentence.

Pure, over a classified Snapshot and its edges (analyze/graph/waitgraph.py). In the order the
verdict rules read them (analyze/rules/graph.py):

- a cycle: following each stuck thread's wait returns to where it started (a deadlock), two
  threads of one process each holding the lock the other takes among them (ABBA), a thread
  owning the GIL while blocked on a pipe only the threads waiting for that GIL could write;
- a self-lock (a thread waits on a lock an outer frame of its own stack holds); a self-wait
  (a loop's thread blocks on a future only it can complete);
- an orphan wait (no thread is left to set the Event, Condition, Queue or Future a thread
  waits on); a lost wake-up (every thread waits for another of its process to notify it);
- a blocked event loop: an asyncio loop thread blocked in a read inside a coroutine, or on
  CPU in one synchronous call of one (patterns/looppatterns.py);
- a lock inherited locked across fork: a forked child's main thread waits on a lock its other
  threads cannot hold; a result nobody computes (a Pool whose workers idle); a call nobody
  makes (ends/uncalled.py); a saturated pool (every worker in a task that waits on the pool);
- a prompt nobody answers (a read of a terminal, or of a FIFO or pipe nobody writes, under pdb
  or ``input()``); a FIFO nobody opens;
- a sink: what everything waits on, transitively, itself waiting on nothing in the job.

One ordered table over one graph (``PATTERNS``), each read against the others (what a cycle
claims, a sink must not claim again); one process's threads: patterns/threadpatterns.py.
"""

from __future__ import annotations

from dataclasses import replace

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.visitors import visitors
from hangscope.analyze.graph.collectiveedges import mesh_words
from hangscope.analyze.graph.listeners import asks
from hangscope.analyze.graph.loopedges import loop_index
from hangscope.analyze.graph.rings import shorter_ring
from hangscope.analyze.graph.waitgraph import build_edges
from hangscope.analyze.graph.waitwalk import (
    Graph,
    ends_elsewhere,
    hop,
    member_notes,
    sends,
    site_words,
    store_keys,
    store_peers,
    thread_words,
)
from hangscope.analyze.patterns.barrierpatterns import barrier_short, uncalled_barrier_end
from hangscope.analyze.patterns.behind import behind, collective_behind
from hangscope.analyze.patterns.calm.calm import native_server
from hangscope.analyze.patterns.calm.calm_chain import waits_for_work
from hangscope.analyze.patterns.calm.calmends import calm_end
from hangscope.analyze.patterns.calm.engines import idle_front
from hangscope.analyze.patterns.checkouts import nested_checkout
from hangscope.analyze.patterns.cycleadvice import CAPTURED, captured, cycle_advice, first_cause
from hangscope.analyze.patterns.cyclecause import co_suspects
from hangscope.analyze.patterns.ends.crashloops import crash_loop
from hangscope.analyze.patterns.ends.deadprocs import crashed_child, crashed_words, dead_process
from hangscope.analyze.patterns.ends.deadthreads import dead_thread
from hangscope.analyze.patterns.ends.fdlimit import exhausted, exhausted_words
from hangscope.analyze.patterns.ends.fifopatterns import fifo_open
from hangscope.analyze.patterns.ends.forkedzmq import forked_context
from hangscope.analyze.patterns.ends.forkwaits import fork_notifier
from hangscope.analyze.patterns.ends.groupgap import group_gap
from hangscope.analyze.patterns.ends.grpcpool import overbooked_pool
from hangscope.analyze.patterns.ends.joinedreceive import joined_receive
from hangscope.analyze.patterns.ends.lostreplies import lost_reply
from hangscope.analyze.patterns.ends.oneatatime import one_at_a_time
from hangscope.analyze.patterns.ends.ownendpatterns import own_end
from hangscope.analyze.patterns.ends.selfconnect import self_connect
from hangscope.analyze.patterns.ends.sharedconn import shared_connection
from hangscope.analyze.patterns.ends.signalmasks import signal_wait
from hangscope.analyze.patterns.ends.signalwaits import gone_signal
from hangscope.analyze.patterns.ends.stoppedends import stopped_end, stopped_words
from hangscope.analyze.patterns.ends.unaccepted import unaccepted, unaccepted_words
from hangscope.analyze.patterns.ends.uncalled import behind_loop, constructing, uncalled
from hangscope.analyze.patterns.ends.unconnected import unconnected_call, unconnected_zmq
from hangscope.analyze.patterns.ends.zmqends import owes_nothing, unowed_receive, unpeered_receive
from hangscope.analyze.patterns.gilpatterns import gil_native_wait, gil_ring
from hangscope.analyze.patterns.looppatterns import (
    event_loop,
    loop_on_cpu,
    loop_reads,
    loop_sync_wait,
)
from hangscope.analyze.patterns.loopwake import unwoken_loop
from hangscope.analyze.patterns.managerpatterns import orphan_manager_lock
from hangscope.analyze.patterns.pendingtasks import pending_tasks
from hangscope.analyze.patterns.permitpatterns import leaked_permits
from hangscope.analyze.patterns.poolpatterns import idle_executor, lost_result, pool_saturated
from hangscope.analyze.patterns.promptpatterns import prompt, prompt_edge
from hangscope.analyze.patterns.selfcalls import pool_cycle, rpc_pools, self_call, unserved_call
from hangscope.analyze.patterns.siblings import behind_sibling
from hangscope.analyze.patterns.stalepatterns import stale_holder
from hangscope.analyze.patterns.starvedpools import callback_wait, own_pool, starved_pool
from hangscope.analyze.patterns.threadpatterns import (
    fork_lock,
    lock_ring,
    orphan_wait,
    self_lock,
    self_wait,
)
from hangscope.analyze.patterns.ttystop import tty_stopped
from hangscope.analyze.patterns.upgradepatterns import lock_upgrade
from hangscope.analyze.patterns.wakepatterns import full_queue, lost_wakeup
from hangscope.model import Category, Process, Snapshot, Thread
from hangscope.model.waits import WaitGraph, WaitPattern
from hangscope.words import short_who, verb, who


def _end(g: Graph, edges: list[int], waiters: int = 1) -> str:
    """What the last thread of a chain does: ``; PID 9 sleeps at x (y.py:3)``; a collective
    the store waiters never join (``waiters`` of them) says it waits for them."""
    last = g.edges[edges[-1]]
    if last.to_pid is None or last.to_pid not in g.procs or (
            last.to_pid == last.pid and last.to_tid is None):
        return ""
    proc = g.procs[last.to_pid]
    if proc.is_stopped and not proc.is_exited:
        return stopped_words(g, proc)
    thread = g.threads.get((proc.pid, last.to_tid)) if last.to_tid else proc.working_thread
    if thread is None or thread.category is None:
        return ""
    doing = verb(thread.category, op=thread.op)
    them = ""
    if last.kind == "store" and thread.category is Category.COLLECTIVE:
        them = " for them" if waiters > 1 else " for it"
    mesh = mesh_words(g.snap, proc) if thread.category is Category.COLLECTIVE else ""
    return f"; {thread_words(proc, thread)} {doing}{site_words(thread)}{them}{mesh}"


def _suspect(g: Graph, edges: list[int]) -> tuple[int | None, int | None]:
    last = g.edges[edges[-1]]
    if last.to_pid is None or last.to_pid not in g.procs or (
            last.to_pid == last.pid and last.to_tid is None):
        return last.pid, last.tid
    return last.to_pid, last.to_tid


def _cycle(g: Graph) -> WaitPattern | None:
    return _find_cycle(g, rings=False)


def _lock_cycle(g: Graph) -> WaitPattern | None:
    return _find_cycle(g, rings=True)


def _find_cycle(g: Graph, rings: bool) -> WaitPattern | None:
    """A cycle across processes (``rings`` False), or threads of one process each holding the
    lock the next one takes (``rings`` True: rules.py's local deadlock states it)."""
    # From each process's working thread, then from each thread waiting on a Python lock: two
    # request threads of a server deadlock while its main thread idles in accept().
    starts = [(pid, None) for pid in sorted(g.out)] + list(dict.fromkeys(
        (e.pid, e.tid) for e in g.edges if e.kind == "py_lock" and e.to_tid != e.tid))
    for pid, tid in starts:
        path, start = g.walk(pid, tid)
        if start is None:
            continue
        ring = shorter_ring(g, path[start:])
        if any(prompt_edge(g, i) for i in ring) or ends_elsewhere(g, ring):
            continue  # a prompt's parent holding its stdin, or a holder that works
        if any(loop_reads(g, i) is not None for i in ring):
            continue  # an event loop blocked in a sync read: the cause; the event loop tells it
        if all(g.edges[i].kind in ("tcp", "unix") and waits_for_work(g.snap, g.edges[i])
               for i in ring):
            continue  # each side waits for the other's next request: idle peers, no deadlock
        if owes_nothing(g, ring):
            continue  # a zmq receive's guess at a server that only waits for its next request
        members = tuple(dict.fromkeys(g.edges[i].pid for i in ring))
        threads = {(g.edges[i].pid, g.edges[i].tid) for i in ring}
        kinds = tuple(g.edges[i].kind for i in ring)
        if len(members) < 2 and "file_lock" not in kinds and not (
                len(threads) >= 2 and ("py_lock" in kinds or "gil" in kinds or "loop" in kinds)):
            continue  # a thread waiting on its own process's thread is not a deadlock alone
        if (len(members) == 1 and set(kinds) == {"py_lock"}) is not rings:
            continue
        if rings:
            return lock_ring(g, ring)
        if len(members) == 1 and "gil" in kinds:
            return gil_ring(g, ring)
        advice = cycle_advice(g, ring, kinds)
        if advice.startswith("one of them must act first") and captured(g, ring):
            advice = CAPTURED  # no child wait: the reader reads another pipe, not waitpid
        held = _from_lock_holder(g, ring)
        rotated = held != ring and any(g.edges[i].kind == "py_lock" for i in ring)
        ring = _from_unaccepting_server(g, held)
        ring = first_cause(g, ring)  # a buffered reply's worker, a parent joining undrained
        members = tuple(dict.fromkeys(g.edges[i].pid for i in ring))
        both = _both_read(g, ring)
        chain = both or "; ".join(hop(g, i) for i in ring) + f": {advice}"
        chain += behind(g, members)  # the ranks or threads that wait on the cycle
        # A lock's holder blocked on another process: the holder is where the cycle is held,
        # and the process it waits on is the one that never acts: both are suspects (and both
        # ends of one connection that each wait to read it).
        also = co_suspects(g, members) if both or rotated else ()
        return WaitPattern("cycle", members, chain, tuple(ring), members[0],
                           g.edges[ring[0]].tid, also)
    return None


def _from_lock_holder(g: Graph, ring: list[int]) -> list[int]:
    """``ring`` turned to start at the wait of the holder of its Python lock (a logging lock
    held by a thread blocked writing a pipe nobody reads), or of its one file lock (not ABBA):
    the holder's own wait is the cause, not the first PID the walk met (PIDs wrap)."""
    flocks = sum(g.edges[i].kind == "file_lock" for i in ring)
    for k, i in enumerate(ring):
        edge = g.edges[i]
        if edge.kind != "py_lock" and (edge.kind, flocks) != ("file_lock", 1):
            continue
        nxt = ring[(k + 1) % len(ring)]
        if g.edges[nxt].pid == edge.to_pid and edge.to_tid in (None, g.edges[nxt].tid):
            return ring[k + 1:] + ring[:k + 1]  # (a flock's holder is a process, no thread)
    return ring


def _from_unaccepting_server(g: Graph, ring: list[int]) -> list[int]:
    """``ring`` turned to start at a server that has not accepted a connection waiting in its
    accept queue, because it is blocked on another connection of the ring: one thread that
    serves one connection at a time is where the cycle is held (a single-threaded HTTP
    server on a client's idle keep-alive connection)."""
    for k, i in enumerate(ring):
        edge = g.edges[i]
        if edge.kind in ("tcp", "unix") and "accept queue" in edge.how:
            nxt = (k + 1) % len(ring)
            if g.edges[ring[nxt]].pid == edge.to_pid:
                return ring[nxt:] + ring[:nxt]
    return ring


def _both_read(g: Graph, ring: list[int]) -> str:
    """Both ends of one connection each wait to read it, each from the thread blocked on the
    other's socket: nobody will send (a request read until EOF, or a length, the other never
    sends); or both wait to write it (both buffers full): the cycle's sentence, or "" when it
    is not that."""
    if len(ring) != 2:
        return ""
    a, b = (g.edges[i] for i in ring)
    if not {a.kind, b.kind} <= {"unix", "tcp"} or sends(a) != sends(b) or (
            a.to_tid, b.to_tid) != (b.tid, a.tid) or (a.to_pid, b.to_pid) != (b.pid, a.pid):
        return ""
    ta, tb = g.threads.get((a.pid, a.tid)), g.threads.get((b.pid, b.tid))
    first, second = thread_words(g.procs[a.pid], ta), thread_words(g.procs[b.pid], tb)
    if sends(a):  # both send buffers full: each writes, neither reads
        return (f"{first} and {second} both wait to send on the same connection, and neither "
                f"reads: {first} writes {a.object.split(' (')[0]}{site_words(ta)}; {second} "
                f"writes its peer, {b.object.split(' (')[0]},{site_words(tb)}: both socket "
                "buffers are full; one side must read while it writes (a reader thread, "
                "non-blocking I/O, or smaller messages with replies in between)")
    return (f"{first} and {second} both wait to read the same connection, and neither "
            f"sends: {first} reads {a.object.split(' (')[0]}{site_words(ta)}; {second} reads "
            f"its peer, {b.object.split(' (')[0]},{site_words(tb)}"
            ": a framing bug: one side reads until EOF, or for more than the other sends; one "
            "side must send, or shut down its write half (sock.shutdown(socket.SHUT_WR)), first")


def _sink(g: Graph) -> WaitPattern | None:
    """The longest chain from a stuck subject that holds a wait other than a child's."""
    best: tuple[tuple[bool, int, bool], list[int]] | None = None
    outside = visitors(g.snap)
    if outside and any(r.decision == "progressing" for r in (
            g.snap.progress.ranks if g.snap.progress is not None else ())):
        # a client from outside waits on a job that works: its answer is being made
        outside_waits = outside
    else:
        outside_waits = frozenset()
    # From every process's working thread, and from every thread that waits on another
    # thread of its own process (a Python lock, the GIL): they need not be the working one.
    # A helper's wait (a compile worker's queue) is how it always waits: no chain starts there.
    helpers = {p.pid for p in g.snap.of_roles(*HELPER_ROLES)}
    starts = [(pid, None) for pid in g.procs  # (a walk from a PID with no wait out is empty)
              if pid in g.out and pid not in helpers] + list(
        dict.fromkeys((e.pid, e.tid) for e in g.edges
                      if e.to_tid is not None and e.pid not in helpers))
    for pid, tid in starts:
        if pid in outside_waits:
            continue
        path, start = g.walk(pid, tid)
        # A chain of child or thread joins only says who waits: it must hold one that says why.
        if not path or start is not None or (all(g.edges[i].kind in ("child", "thread")
                                                 for i in path) and stopped_end(g, path)
                                             is None) or calm_end(g, path):
            continue  # (a stopped process at the end says why: what stopped it)
        if g.edges[path[-1]].kind == "collective":
            continue  # ends at the rank the collective waits for: the straggler rules say it
        # A chain inside the job first: one from a visitor (analyze/evidence/visitors.py)
        # says only that the server has not answered. Of chains as long, one that starts with
        # a request to a listening port: a client waits for an answer, a worker for work.
        first = g.edges[path[0]]
        peer = g.procs.get(first.to_pid or 0)
        rank = (pid not in outside, len(path), peer is not None and asks(first, peer))
        if best is None or rank > best[0]:
            best = (rank, path)
    if best is None:
        return None
    path = best[1]
    suspect, tid = _suspect(g, path)
    crashed = crashed_child(g, suspect)
    members = tuple(dict.fromkeys([*(g.edges[i].pid for i in path),
                                   *(p for i in path if (p := g.edges[i].to_pid))]))
    last = g.edges[path[-1]]
    end = g.procs.get(last.to_pid or 0)
    idle = joined_receive(g, path) or (_idle_loop(g.snap, end, g.threads.get(
        (end.pid, last.to_tid)) if last.to_tid else end.working_thread)
        if end is not None and last.kind in ("tcp", "unix") else "")
    together = store_peers(g, path[0])
    chain = "; ".join([hop(g, path[0], together), *(hop(g, i) for i in path[1:])]) + (
        _starved_end(g.snap, end) or idle or uncalled_barrier_end(g, path[-1])
        or _end(g, path, waiters=len(together) + 1)) + (
        crashed_words(g, crashed) if crashed is not None else "") + (
        _unset_key(g, path, suspect)) + (
        # the ranks in a collective for the rank whose chain this is, blocked outside any
        collective_behind(g, [g.edges[path[0]].pid]) if g.edges[path[0]].kind != "store"
        else "")
    members = tuple(dict.fromkeys([*members, *(g.edges[k].pid for k in together)]))
    if crashed is not None:  # the end waits on what its crashed child would have sent
        members, suspect, tid = (*members, crashed.pid), crashed.pid, None
    return WaitPattern("sink", members, chain, (path[0], *together, *path[1:]), suspect, tid)


def _starved_end(snap: Snapshot, end: Process | None) -> str:
    """Why the chain's end cannot take what it is sent: out of fds, or its loop no longer
    watching the listener the chain queues on."""
    if end is None:
        return ""
    out = next((e for e in exhausted(snap) if e.proc.pid == end.pid), None)
    if out is not None:
        return f"; {who(end)} has {exhausted_words(out)}"
    queued = next((u for u in unaccepted(snap) if u.proc.pid == end.pid), None)
    return f"; {who(end)}: {unaccepted_words(queued)}" if queued is not None else ""


def _unset_key(g: Graph, path: list[int], suspect: int | None) -> str:
    """What to check where a chain ends at the store's owner, whose key nobody set."""
    last = g.edges[path[-1]]
    keys = store_keys(g, last.pid)
    owner = g.procs.get(suspect or 0)
    if last.kind != "store" or not keys or owner is None or last.to_pid != suspect:
        return ""
    named = " and ".join(map(repr, keys))
    thread = owner.working_thread
    before = (", and that it sets it before the collective it waits in"
              if thread is not None and thread.category is Category.COLLECTIVE else "")
    return (f": nobody set {named}; look where {short_who(owner)} sets it: a key set under "
            f"another name (a PrefixStore prepends its prefix; a version or rank in the "
            f"name){before}")


def _idle_loop(snap: Snapshot, proc: Process, thread: Thread | None) -> str:
    """An asyncio server idle in its selector while a client waits: an await nothing ends."""
    if thread is None:
        return ""
    if native_server(proc, snap.waits.kernel if snap.waits is not None else None):
        return (f"; {who(proc)} is idle, not blocked: its event loop waits (epoll) over its "
                "listening socket with no request to answer: the request never reached it "
                "whole (a command sent in part, a frame cut short) or its reply went to "
                "another connection")
    python = [f for f in thread.frames if not f.native]
    if not python or not (python[0].file or "").endswith("selectors.py") or loop_index(
            thread) is None:
        return ""
    died = [line.strip() for line in proc.log_errors
            if "Task exception was never retrieved" in line or "exception=" in line]
    text = (f"; the asyncio loop of {who(proc)} is idle, not blocked: the request's coroutine "
            "is suspended on an await that nothing will complete (a future whose setter, "
            "a task or callback, died or was never scheduled; py-spy cannot see suspended "
            "coroutines: list them with asyncio.all_tasks(), aiomonitor, or python -X dev)")
    if died:
        text += f"; its output says: {died[-1][:160]!r}"
    return text


PATTERNS = (self_connect, self_call, pool_cycle, rpc_pools, tty_stopped, own_end, unconnected_zmq,
            behind_sibling, _cycle, _lock_cycle, shared_connection, gil_native_wait, self_lock,
            callback_wait, lock_upgrade, self_wait, barrier_short, leaked_permits, nested_checkout,
            starved_pool, orphan_manager_lock, fork_notifier, signal_wait, orphan_wait, own_pool,
            stale_holder, constructing, behind_loop, full_queue, lost_wakeup, gone_signal,
            unwoken_loop, event_loop, loop_on_cpu, loop_sync_wait, fork_lock, lost_result,
            idle_executor, pool_saturated, pending_tasks, unserved_call, uncalled, prompt,
            unconnected_call, lost_reply, fifo_open, crash_loop, dead_thread, dead_process,
            one_at_a_time, group_gap, _sink, unowed_receive, unpeered_receive, forked_context,
            overbooked_pool)


def wait_graph(snap: Snapshot) -> WaitGraph:
    """The graph of a classified snapshot and every pattern that holds in it."""
    edges = build_edges(snap)
    if idle_front(snap, edges) is not None:
        # An idle serving engine (analyze/patterns/calm/engines.py): its front end holds no
        # request and every process waits for its next message. Its waits are for work nobody
        # asked for; two TP workers each polling the zmq sockets they share read as a ring
        # (a zmq receive waits on every connection of its process), and are no deadlock.
        return WaitGraph(edges, ())
    g = Graph(snap, edges)
    # A pattern among a framework's helpers alone (Ray's agents watching their parent through
    # a pipe, a resource tracker) is how they always wait: never the job's story.
    helpers = {p.pid for p in snap.of_roles(*HELPER_ROLES)}
    patterns = tuple(replace(p, chain=p.chain + member_notes(g, p))
                     for find in PATTERNS if (p := find(g)) is not None
                     and not (helpers and set(p.members) <= helpers))
    return WaitGraph(edges, patterns)
