"""The patterns of the wait-for graph, each with its suspect and the chain in one sentence.

Pure, over a classified Snapshot and its edges (analyze/waitgraph.py). In the order the verdict
rules read them (analyze/rules_graph.py):

- a cycle: following each stuck thread's wait returns to where it started (a deadlock);
- a blocked event loop: an asyncio loop thread blocked in a read inside a coroutine;
- a lock inherited held through fork: a forked child's only thread waits on a lock;
- a result nobody computes: a driver waits on its Pool while every worker idles;
- a prompt nobody answers: a read of a terminal, or of a FIFO or pipe nobody writes, under
  pdb or ``input()``;
- a sink: the thread that everything waits on, transitively, which itself waits on nothing
  in the job (or on something outside it).

Why one file: the patterns are one ordered table over one graph (``PATTERNS``), each small and
read against the others (what a cycle claims, a sink must not claim again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze.calm import calm_kind
from hangscope.analyze.roles import HELPER_ROLES
from hangscope.analyze.stackmemo import per_stack
from hangscope.analyze.waitgraph import (
    blocked as _blocked,
)
from hangscope.analyze.waitgraph import (
    build_edges,
    edges_from,
    user_frame,
    waits_on_lock,
)
from hangscope.model import Frame, Process, Snapshot, Thread
from hangscope.wait_evidence import WaitEdge, WaitGraph, WaitPattern
from hangscope.words import verb, who


class _Graph:
    def __init__(self, snap: Snapshot, edges: Sequence[WaitEdge]) -> None:
        self.snap = snap
        self.edges = edges
        self.procs = {p.pid: p for p in snap.processes}
        self.out = edges_from(edges)
        self.threads = {(p.pid, t.tid): t for p in snap.processes for t in p.threads}

    def live_edges(self, pid: int, tid: int | None) -> list[int]:
        """Edges out of a thread still blocked; tid None: out of the process's working thread
        (the thread that says where it is: a pool's reader threads wait for data, they are
        not what the process waits on)."""
        if tid is None:
            proc = self.procs.get(pid)
            tid = proc.working_tid if proc is not None else None
        found = [i for i in self.out.get(pid, []) if self.edges[i].tid == tid
                 and (t := self.threads.get((pid, tid))) is not None and _blocked(t)]
        # Another process before its own; a thread that itself waits before an idle one.
        found.sort(key=lambda i: (self.edges[i].to_pid == pid and self.edges[i].to_tid is None,
                                  not self._waits(self.edges[i])))
        return found

    def _waits(self, edge: WaitEdge) -> bool:
        if edge.to_pid is None:
            return True
        if edge.to_tid is None:
            return edge.to_pid != edge.pid
        return any(self.edges[i].tid == edge.to_tid for i in self.out.get(edge.to_pid, []))

    def walk(self, pid: int, tid: int | None) -> tuple[list[int], int | None]:
        """Follow the first wait from (pid, tid): (edges followed, index where a cycle
        starts in that list, or None: it ended at a sink)."""
        path: list[int] = []
        seen: dict[tuple[int, int | None], int] = {}
        node: tuple[int, int | None] = (pid, tid)
        while True:
            out = self.live_edges(*node)
            if not out:
                return path, None
            edge = self.edges[out[0]]
            here = (edge.pid, edge.tid)
            if here in seen:
                return path, seen[here]
            seen[here] = len(path)
            path.append(out[0])
            if edge.to_pid is None or edge.to_pid not in self.procs or (
                    edge.to_pid == edge.pid and edge.to_tid is None):
                return path, None  # outside the job, or its own process holds the other end
            node = (edge.to_pid, edge.to_tid)


def _proc_words(proc: Process) -> str:
    return who(proc)


def _thread_words(proc: Process, thread: Thread | None) -> str:
    if thread is None or len([t for t in proc.threads if t.python]) <= 1:
        return who(proc)
    return f"thread {thread.name or thread.tid} of {who(proc)}"


def _site(thread: Thread | None) -> str:
    if thread is None:
        return ""
    if thread.site:  # the user's line that called into the wait (classify.py)
        return f" at {thread.site}"
    frame = user_frame(thread)
    if frame is not None:
        return f" at {frame.name} ({frame.short_file}:{frame.line})"
    return f" at {thread.site}" if thread.site else ""


def _hop(g: _Graph, i: int) -> str:
    """One edge as a clause: ``PID 9 waits for child 10 (wait4) at run (x.py:3)``."""
    edge = g.edges[i]
    proc = g.procs[edge.pid]
    thread = g.threads.get((edge.pid, edge.tid))
    me = _thread_words(proc, thread)
    target = g.procs.get(edge.to_pid) if edge.to_pid is not None else None
    them = who(target) if target is not None else (edge.outside or "something outside the job")
    if edge.to_pid == edge.pid and edge.to_tid is None:
        them = "its own process (no other process holds the other end)"
    site = _site(thread)
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
        return f"{me} joins {_thread_words(proc, holder)}{site}"
    if edge.kind in ("gil", "py_lock"):
        holder = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        peers = [e for e in g.edges if e.kind == edge.kind and e.pid == edge.pid
                 and e.to_tid == edge.to_tid]
        if len(peers) > 1:
            me = f"{len(peers)} threads of {who(proc)}"
        waits = "wait" if len(peers) > 1 else "waits"
        if edge.kind == "gil":
            return f"{me} {waits} for the GIL, which {_thread_words(proc, holder)} owns"
        return (f"{me} {waits} for {edge.object}, probably held by "
                f"{_thread_words(proc, holder)} ({edge.how})")
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


def _end(g: _Graph, edges: list[int]) -> str:
    """What the last thread of a chain does: ``; PID 9 sleeps at x (y.py:3)``."""
    last = g.edges[edges[-1]]
    if last.to_pid is None or last.to_pid not in g.procs or (
            last.to_pid == last.pid and last.to_tid is None):
        return ""
    proc = g.procs[last.to_pid]
    thread = g.threads.get((proc.pid, last.to_tid)) if last.to_tid else proc.working_thread
    if thread is None or thread.category is None:
        return ""
    return f"; {_thread_words(proc, thread)} {verb(thread.category, op=thread.op)}{_site(thread)}"


def _suspect(g: _Graph, edges: list[int]) -> tuple[int | None, int | None]:
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


def _cycle(g: _Graph) -> WaitPattern | None:
    for pid in sorted(g.out):
        path, start = g.walk(pid, None)
        if start is None:
            continue
        ring = path[start:]
        members = tuple(dict.fromkeys(g.edges[i].pid for i in ring))
        if len(members) < 2 and not any(g.edges[i].kind in ("file_lock",) for i in ring):
            continue  # a thread waiting on its own process's thread is not a deadlock alone
        kinds = tuple(g.edges[i].kind for i in ring)
        advice = next((a for k, a in _ADVICE.items() if set(k) <= set(kinds)),
                      "one of them must act first: break the cycle")
        chain = "; ".join(_hop(g, i) for i in ring) + f": {advice}"
        return WaitPattern("cycle", members, chain, tuple(ring), members[0], g.edges[ring[0]].tid)
    return None


_LOOP = ("_run_once", "run_forever", "run_until_complete")


def _event_loop(g: _Graph) -> WaitPattern | None:
    for i, edge in enumerate(g.edges):
        thread = g.threads.get((edge.pid, edge.tid))
        if thread is None or edge.kind not in ("unix", "tcp", "pipe", "fifo", "store"):
            continue
        python = [f for f in thread.frames if not f.native]
        loop = next((k for k, f in enumerate(python) if f.file and "asyncio" in f.file
                     and f.name.rsplit(".", 1)[-1] in _LOOP), None)
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


def _forked(proc: Process, parent: Process | None) -> bool:
    """A fork without exec: the parent's command line, and not multiprocessing's spawn or
    forkserver (a fresh interpreter: ``spawn_main``/``--multiprocessing-fork``)."""
    return parent is not None and bool(proc.cmdline) and proc.cmdline == parent.cmdline \
        and not any("--multiprocessing-fork" in a or "spawn_main" in a for a in proc.cmdline)


def _fork_lock(g: _Graph) -> WaitPattern | None:
    for proc in g.snap.processes:
        if proc.is_exited or (proc.num_threads or len(proc.threads)) != 1:
            continue
        thread = proc.threads[0] if proc.threads else None
        parent = g.procs.get(proc.ppid or 0)
        if thread is None or not _blocked(thread) or not waits_on_lock(thread) or not _forked(
                proc, parent):
            continue
        assert parent is not None
        frame = next((f for f in thread.frames if not f.native), None)
        where = f" at {frame.name} ({frame.short_file}:{frame.line})" if frame else ""
        chain = (f"{who(proc)}, forked from {who(parent)} without exec, has one thread, which "
                 f"waits on a lock{where}: the thread that held it when {parent.pid} forked "
                 f"exists only in {parent.pid}, so nothing in {proc.pid} can release it; start "
                 "children with 'spawn' or 'forkserver', or fork before starting threads")
        return WaitPattern("fork_lock", (proc.pid, parent.pid), chain, (), proc.pid, thread.tid)
    return None


def _in_pool_wait(thread: Thread) -> bool:
    return _pool_wait_frames(thread.frames)


@per_stack  # asked of every rank's working thread: once per distinct stack
def _pool_wait_frames(frames: tuple[Frame, ...]) -> bool:
    return any(not f.native and f.file and f.file.endswith("multiprocessing/pool.py")
               and f.name.rsplit(".", 1)[-1] in ("get", "wait", "next", "__next__")
               for f in frames)


def _pool_worker_idle(proc: Process) -> bool:
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    return main is not None and any(
        not f.native and f.file and f.file.endswith("multiprocessing/pool.py")
        and f.name.rsplit(".", 1)[-1] == "worker" for f in main.frames) and _blocked(main)


def _lost_result(g: _Graph) -> WaitPattern | None:
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
        chain = (f"{who(proc)} waits for a result of its multiprocessing Pool{_site(waiting)} "
                 f"while all {len(workers)} workers idle waiting for tasks: the task was "
                 f"lost{late}; use concurrent.futures.ProcessPoolExecutor (it raises "
                 "BrokenProcessPool) or a timeout on get()")
        return WaitPattern("lost_result", (proc.pid, *(p.pid for p in workers)), chain, (),
                           proc.pid, waiting.tid)
    return None


def _resource_tracker(proc: Process) -> bool:
    return any("resource_tracker" in part for part in proc.cmdline)


_FILTERS = ("--local-ranks-filter", "--local_ranks_filter", "--tee", "--redirects")


def _prompt(g: _Graph) -> WaitPattern | None:
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
        chain = (f"{_thread_words(proc, thread)} waits for input on {edge.object.split(' (')[0]}"
                 f"{_site(thread)} ({'a pdb prompt' if _pdb(thread) else 'a prompt'}), "
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


def _sink(g: _Graph) -> WaitPattern | None:
    """The longest chain from a stuck subject that holds a wait other than a child's."""
    best: tuple[int, list[int]] | None = None
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
        if best is None or len(path) > best[0]:
            best = (len(path), path)
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
    chain = "; ".join(_hop(g, i) for i in path) + _end(g, path)
    return WaitPattern("sink", members, chain, tuple(path), suspect, tid)


def _calm(snap: Snapshot, proc: Process) -> str | None:
    """``paused`` (one long sleep, woken 0 times in the window: what waits on it waits for a
    phase to end) or ``idle`` (a server waiting for requests), as analyze/calm.py reads it."""
    measured = next((r for r in (snap.progress.ranks if snap.progress else ())
                     if r.pid == proc.pid), None)
    return calm_kind(proc, measured)


PATTERNS = (_cycle, _event_loop, _fork_lock, _lost_result, _prompt, _sink)


def _what_else(g: _Graph, pattern: WaitPattern) -> str:
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
    g = _Graph(snap, edges)
    patterns = tuple(replace(p, chain=p.chain + _what_else(g, p))
                     for find in PATTERNS if (p := find(g)) is not None)
    return WaitGraph(edges, patterns)
