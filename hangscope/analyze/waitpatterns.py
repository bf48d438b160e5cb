"""The patterns of the wait-for graph, each with its suspect and the chain in one sentence.

Pure, over a classified Snapshot and its edges (analyze/waitgraph.py). In the order the verdict
rules read them (analyze/rules_graph.py):

- a cycle: following each stuck thread's wait returns to where it started (a deadlock), two
  threads of one process each holding the lock the other takes among them (ABBA);
- a self-lock: a thread waits on a lock an outer frame of its own stack holds (a signal
  handler over the frame it interrupted);
- a self-wait: an asyncio loop's thread blocks on a concurrent future nothing else can
  complete (``run_coroutine_threadsafe`` on its own loop);
- an orphan wait: a thread waits on an Event, Condition, Queue or Future of its process and no
  thread is left that could set it (the producer died);
- a blocked event loop: an asyncio loop thread blocked in a read inside a coroutine;
- a lock inherited locked across fork: a forked child's main thread waits on a lock and its
  other threads (a queue feeder, idle helpers) cannot hold it;
- a result nobody computes: a driver waits on its Pool while every worker idles;
- a prompt nobody answers: a read of a terminal, or of a FIFO or pipe nobody writes, under
  pdb or ``input()``;
- a sink: the thread that everything waits on, transitively, which itself waits on nothing
  in the job (or on something outside it).

The patterns are one ordered table over one graph (``PATTERNS``), each read against the others
(what a cycle claims, a sink must not claim again); those of threads inside one process live in
analyze/threadpatterns.py, the walk in analyze/waitwalk.py.
"""

from __future__ import annotations

from dataclasses import replace

from hangscope.analyze.calm import calm_kind
from hangscope.analyze.roles import HELPER_ROLES
from hangscope.analyze.threadpatterns import (
    fork_lock,
    lock_ring,
    orphan_wait,
    self_lock,
    self_wait,
)
from hangscope.analyze.waitgraph import blocked as _blocked
from hangscope.analyze.waitgraph import build_edges, user_frame
from hangscope.analyze.waitwalk import LOOP, Graph, site_words, thread_words
from hangscope.model import Process, Snapshot, Thread
from hangscope.wait_evidence import WaitEdge, WaitGraph, WaitPattern
from hangscope.words import verb, who


def _hop(g: Graph, i: int) -> str:
    """One edge as a clause: ``PID 9 waits for child 10 (wait4) at run (x.py:3)``."""
    edge = g.edges[i]
    proc = g.procs[edge.pid]
    thread = g.threads.get((edge.pid, edge.tid))
    me = thread_words(proc, thread)
    target = g.procs.get(edge.to_pid) if edge.to_pid is not None else None
    them = who(target) if target is not None else (edge.outside or "something outside the job")
    if edge.to_pid == edge.pid and edge.to_tid is None:
        them = "its own process (no other process holds the other end)"
    site = site_words(thread)
    if edge.kind == "child":
        return f"{me} waits for its child {them}{site}"
    if edge.kind in ("pipe", "fifo"):
        doing = "writing" if "(read end)" in edge.object else "reading"
        other = "reads" if doing == "writing" else "writes"
        what = edge.object.split(" (")[0]
        if edge.fd in (1, 2):
            what = f"its {'stdout' if edge.fd == 1 else 'stderr'} ({what})"
        return f"{me} is blocked {doing} {what}{site}, which only {them} {other}"
    if edge.kind == "thread":
        holder = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        return f"{me} joins {thread_words(proc, holder)}{site}"
    if edge.kind in ("gil", "py_lock"):
        holder = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        peers = [e for e in g.edges if e.kind == edge.kind and e.pid == edge.pid
                 and e.to_tid == edge.to_tid]
        if len(peers) > 1:
            me = f"{len(peers)} threads of {who(proc)}"
        waits = "wait" if len(peers) > 1 else "waits"
        if edge.kind == "gil":
            return f"{me} {waits} for the GIL, which {thread_words(proc, holder)} owns"
        return (f"{me} {waits} for {edge.object}, probably held by "
                f"{thread_words(proc, holder)} ({edge.how})")
    if edge.kind == "file_lock":
        return f"{me} waits for the {edge.object}{site}, held by {them}"
    if edge.kind == "terminal":
        return f"{me} reads {edge.object}{site}"
    if edge.kind == "store":
        return (f"{me} waits in TCPStore get/wait for a key of {edge.object}{site}, which "
                f"{them} serves and nobody has set")
    if edge.kind in ("unix", "tcp"):
        doing = "to send on" if edge.how.startswith(("write", "send")) else "for a reply on"
        return f"{me} waits {doing} {edge.object}{site}, from {them}"
    return f"{me} waits on {edge.object}{site} for {them}"


def _end(g: Graph, edges: list[int]) -> str:
    """What the last thread of a chain does: ``; PID 9 sleeps at x (y.py:3)``."""
    last = g.edges[edges[-1]]
    if last.to_pid is None or last.to_pid not in g.procs or (
            last.to_pid == last.pid and last.to_tid is None):
        return ""
    proc = g.procs[last.to_pid]
    thread = g.threads.get((proc.pid, last.to_tid)) if last.to_tid else proc.working_thread
    if thread is None or thread.category is None:
        return ""
    doing = verb(thread.category, op=thread.op)
    return f"; {thread_words(proc, thread)} {doing}{site_words(thread)}"


def _suspect(g: Graph, edges: list[int]) -> tuple[int | None, int | None]:
    last = g.edges[edges[-1]]
    if last.to_pid is None or last.to_pid not in g.procs or (
            last.to_pid == last.pid and last.to_tid is None):
        return last.pid, last.tid
    return last.to_pid, last.to_tid


_ADVICE = {
    ("file_lock",): "take the locks in the same order in every process",
    ("child", "pipe"): "read the child's output while waiting (Popen.communicate(), or drain "
                       "the queue before join())",
    ("pipe", "child"): "read the child's output while waiting (Popen.communicate(), or drain "
                       "the queue before join())",
}


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
        ring = path[start:]
        members = tuple(dict.fromkeys(g.edges[i].pid for i in ring))
        threads = {(g.edges[i].pid, g.edges[i].tid) for i in ring}
        kinds = tuple(g.edges[i].kind for i in ring)
        if len(members) < 2 and "file_lock" not in kinds and not (
                len(threads) >= 2 and "py_lock" in kinds):
            continue  # a thread waiting on its own process's thread is not a deadlock alone
        if (len(members) == 1 and set(kinds) == {"py_lock"}) is not rings:
            continue
        if rings:
            return lock_ring(g, ring)
        advice = next((a for k, a in _ADVICE.items() if set(k) <= set(kinds)),
                      "one of them must act first: break the cycle")
        chain = "; ".join(_hop(g, i) for i in ring) + f": {advice}"
        return WaitPattern("cycle", members, chain, tuple(ring), members[0], g.edges[ring[0]].tid)
    return None


def _event_loop(g: Graph) -> WaitPattern | None:
    for i, edge in enumerate(g.edges):
        thread = g.threads.get((edge.pid, edge.tid))
        if thread is None or edge.kind not in ("unix", "tcp", "pipe", "fifo", "store"):
            continue
        python = [f for f in thread.frames if not f.native]
        loop = next((k for k, f in enumerate(python) if f.file and "asyncio" in f.file
                     and f.name.rsplit(".", 1)[-1] in LOOP), None)
        if loop is None or loop == 0:
            continue
        inner = user_frame(thread)
        if inner is None or python.index(inner) > loop:
            continue
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


def _in_pool_wait(thread: Thread) -> bool:
    return any(not f.native and f.file and f.file.endswith("multiprocessing/pool.py")
               and f.name.rsplit(".", 1)[-1] in ("get", "wait", "next", "__next__")
               for f in thread.frames)


def _pool_worker_idle(proc: Process) -> bool:
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    return main is not None and any(
        not f.native and f.file and f.file.endswith("multiprocessing/pool.py")
        and f.name.rsplit(".", 1)[-1] == "worker" for f in main.frames) and _blocked(main)


def _lost_result(g: Graph) -> WaitPattern | None:
    for proc in g.snap.processes:
        # The driver waits in its working or its main thread (not a pool's handler threads).
        waiting = next((t for t in proc.threads if t.tid in (proc.working_tid, proc.pid)
                        and _blocked(t) and _in_pool_wait(t)), None)
        if waiting is None:
            continue
        workers = [p for p in g.snap.processes if p.ppid == proc.pid and not p.is_exited
                   and _pool_worker_idle(p)]
        others = [p for p in g.snap.processes if p.ppid == proc.pid and not p.is_exited
                  and p not in workers and p.role not in HELPER_ROLES
                  and p.threads and not _resource_tracker(p)]
        if not workers or others:
            continue
        starts = sorted((p.create_time or 0.0, p.pid) for p in workers)
        late = ""
        # The pool starts its workers together; a later one replaced a worker that died.
        if len(starts) > 1 and starts[-1][0] - starts[-2][0] >= 0.05:
            late = (f"; worker {starts[-1][1]} started {starts[-1][0] - starts[0][0]:.1f} s "
                    "after the pool's first workers: the pool replaced a worker that died "
                    "holding the task")
        chain = (f"{who(proc)} waits for a result of its multiprocessing Pool{site_words(waiting)} "
                 f"while all {len(workers)} workers idle waiting for tasks: the task was "
                 f"lost{late}; use concurrent.futures.ProcessPoolExecutor (it raises "
                 "BrokenProcessPool) or a timeout on get()")
        return WaitPattern("lost_result", (proc.pid, *(p.pid for p in workers)), chain, (),
                           proc.pid, waiting.tid)
    return None


def _resource_tracker(proc: Process) -> bool:
    return any("resource_tracker" in part for part in proc.cmdline)


_FILTERS = ("--local-ranks-filter", "--local_ranks_filter", "--tee", "--redirects")


def _prompt(g: Graph) -> WaitPattern | None:
    for i, edge in enumerate(g.edges):
        thread = g.threads.get((edge.pid, edge.tid))
        if thread is None or edge.kind not in ("terminal", "fifo", "pipe") or (
                edge.kind != "terminal" and edge.to_pid is not None):
            continue
        prompt = any(f.name.rsplit(".", 1)[-1] in ("builtin_input", "cmdloop", "interaction")
                     or (f.file or "").endswith(("/pdb.py", "/cmd.py")) for f in thread.frames)
        proc = g.procs[edge.pid]
        # A Python prompt (input(), pdb, cmd), or a Python program reading its stdin from a
        # terminal or a FIFO; a filter such as `cut` reading its stdin pipe is no prompt.
        if not prompt and not (edge.fd == 0 and edge.kind in ("terminal", "fifo")
                               and proc.python):
            continue
        chain = (f"{thread_words(proc, thread)} waits for input on {edge.object.split(' (')[0]}"
                 f"{site_words(thread)} ({'a pdb prompt' if _pdb(thread) else 'a prompt'}), "
                 "which nobody answers")
        ancestor = g.procs.get(proc.ppid or 0)
        while ancestor is not None:
            argv = ancestor.cmdline
            flags = [" ".join(argv[k:k + 2]) if "=" not in a and k + 1 < len(argv)
                     and not argv[k + 1].startswith("-") else a
                     for k, a in enumerate(argv) if a.split("=", 1)[0] in _FILTERS]
            if flags:
                chain += (f": its launcher {who(ancestor)} runs with {' '.join(flags)}, so "
                          "its output, the prompt included, is not shown")
                break
            ancestor = g.procs.get(ancestor.ppid or 0)
        return WaitPattern("prompt", (proc.pid,), chain, (i,), proc.pid, thread.tid)
    return None


def _pdb(thread: Thread) -> bool:
    return any((f.file or "").endswith("/pdb.py") for f in thread.frames)


def _sink(g: Graph) -> WaitPattern | None:
    """The longest chain from a stuck subject that holds a wait other than a child's."""
    best: tuple[tuple[int, bool], list[int]] | None = None
    # From every process's working thread, and from every thread that waits on another
    # thread of its own process (a Python lock, the GIL): they need not be the working one.
    # A helper's wait (the resource tracker reading its pipe, a compile worker's queue) is how
    # helpers always wait: it says nothing of the job, so no chain starts there.
    helpers = {p.pid for p in g.snap.processes if p.role in HELPER_ROLES}
    starts = [(p.pid, None) for p in g.snap.processes if p.pid not in helpers] + list(
        dict.fromkeys((e.pid, e.tid) for e in g.edges
                      if e.to_tid is not None and e.pid not in helpers))
    for pid, tid in starts:
        path, start = g.walk(pid, tid)
        # Waits for a child or a joined thread only say who waits for whom: the chain must
        # hold a wait that says why (a pipe, a socket, a lock, the GIL, a terminal).
        if not path or start is not None or all(g.edges[i].kind in ("child", "thread")
                                                for i in path):
            continue
        # Of chains as long, one that starts with a request to a listening port: a client
        # waits for an answer, where a worker reading its parent's socket waits for work.
        rank = (len(path), _asks(g, g.edges[path[0]]))
        if best is None or rank > best[0]:
            best = (rank, path)
    if best is None:
        return None
    path = best[1]
    end = g.procs.get(g.edges[path[-1]].to_pid or 0)
    if end is not None and _calm(g.snap, end) == "paused" and not (
            end.listening and g.edges[path[-1]].kind in ("unix", "tcp", "store")):
        # everything waits on one long sleep between phases: paused, not hung (a client
        # waiting for a reply from a server, one that listens, asleep in its handler is a
        # lost request: kept)
        return None
    if end is not None and _calm(g.snap, end) == "idle" and all(
            g.edges[i].kind in ("pipe", "fifo") and "read" in g.edges[i].how for i in path):
        # workers reading their task pipe from a server that waits for requests: an idle
        # service (a client waiting for a reply from an idle server is a lost request: kept)
        return None
    suspect, tid = _suspect(g, path)
    members = tuple(dict.fromkeys([*(g.edges[i].pid for i in path),
                                   *(p for i in path if (p := g.edges[i].to_pid))]))
    last = g.edges[path[-1]]
    idle = _idle_loop(end, g.threads.get((end.pid, last.to_tid)) if last.to_tid else
                      end.working_thread) if end is not None and last.kind in ("tcp",
                                                                              "unix") else ""
    chain = "; ".join(_hop(g, i) for i in path) + (idle or _end(g, path))
    return WaitPattern("sink", members, chain, tuple(path), suspect, tid)


def _asks(g: Graph, edge: WaitEdge) -> bool:
    """A TCP wait for a reply from a port the other process listens on (a request)."""
    peer = g.procs.get(edge.to_pid or 0)
    if edge.kind != "tcp" or peer is None or " -> " not in edge.object:
        return False
    port = edge.object.rsplit(":", 1)[-1]
    return port.isdigit() and any(s.port == int(port) for s in peer.listening)


def _idle_loop(proc: Process, thread: Thread | None) -> str:
    """What an asyncio server idle in its selector while a client waits for its reply means:
    the request's coroutine is suspended on an await nothing completes."""
    if thread is None:
        return ""
    python = [f for f in thread.frames if not f.native]
    if not python or not (python[0].file or "").endswith("selectors.py") or not any(
            "asyncio" in (f.file or "") and f.name.rsplit(".", 1)[-1] in LOOP for f in python):
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


def _calm(snap: Snapshot, proc: Process) -> str | None:
    """``paused`` (one long sleep, woken 0 times in the window: what waits on it waits for a
    phase to end) or ``idle`` (a server waiting for requests), as analyze/calm.py reads it."""
    measured = next((r for r in (snap.progress.ranks if snap.progress else ())
                     if r.pid == proc.pid), None)
    return calm_kind(proc, measured)


PATTERNS = (_cycle, _lock_cycle, self_lock, self_wait, orphan_wait, _event_loop, fork_lock,
            _lost_result, _prompt, _sink)


def _what_else(g: Graph, pattern: WaitPattern) -> str:
    """What the report knows of the chain's members beyond their waits (issue 17, item 8):
    an exited member's exit code, and the last error line (a traceback's exception, an
    error) of a log only that member writes, the same facts the findings read."""
    notes = []
    for pid in pattern.members:
        proc = g.procs.get(pid)
        if proc is None:
            continue
        if proc.is_exited and proc.exit_code is not None:
            notes.append(f"{who(proc)} exited with code {proc.exit_code}")
        shared = any(p.pid != pid and not set(p.log_files).isdisjoint(proc.log_files)
                     for p in g.snap.processes)
        errors = [e for e in proc.log_errors if not e.startswith("Traceback")]
        if errors and proc.log_files and not shared:
            notes.append(f"the log of {who(proc)} ends in an error: {errors[-1].strip()!r}")
    return "".join(f"; {n}" for n in notes)


def wait_graph(snap: Snapshot) -> WaitGraph:
    """The graph of a classified snapshot and every pattern that holds in it."""
    edges = build_edges(snap)
    g = Graph(snap, edges)
    patterns = tuple(replace(p, chain=p.chain + _what_else(g, p))
                     for find in PATTERNS if (p := find(g)) is not None)
    return WaitGraph(edges, patterns)
