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

Why one file: the patterns are one ordered table over one graph (``PATTERNS``), each small and
read against the others (what a cycle claims, a sink must not claim again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze.calm import calm_kind
from hangscope.analyze.roles import HELPER_ROLES
from hangscope.analyze.waitgraph import (
    blocked as _blocked,
)
from hangscope.analyze.waitgraph import (
    build_edges,
    edges_from,
    held_locks,
    lock_key,
    taking_frame,
    user_frame,
    waits_on_lock,
)
from hangscope.model import Category, Frame, Process, Snapshot, Thread
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
    return _find_cycle(g, rings=False)


def _lock_cycle(g: _Graph) -> WaitPattern | None:
    return _find_cycle(g, rings=True)


def _find_cycle(g: _Graph, rings: bool) -> WaitPattern | None:
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
            return _lock_ring(g, ring)
        advice = next((a for k, a in _ADVICE.items() if set(k) <= set(kinds)),
                      "one of them must act first: break the cycle")
        chain = "; ".join(_hop(g, i) for i in ring) + f": {advice}"
        return WaitPattern("cycle", members, chain, tuple(ring), members[0], g.edges[ring[0]].tid)
    return None


def _lock_ring(g: _Graph, ring: list[int]) -> WaitPattern:
    """Threads of one process, each holding the lock the next one wants (ABBA)."""
    pid = g.edges[ring[0]].pid
    proc = g.procs[pid]
    parts = []
    for i in ring:
        edge = g.edges[i]
        me = g.threads.get((pid, edge.tid))
        wants = edge.object.split(" (taken at ", 1)
        held = [f"{g.edges[j].object.split(' (taken at ', 1)[0]}" for j in ring
                if g.edges[j].to_tid == edge.tid]
        site = f" at {wants[1][:-1]}" if len(wants) > 1 else _site(me)
        holds = f"holds {', '.join(held)} and " if held else ""
        parts.append(f"thread {me.name if me and me.name else edge.tid} {holds}waits for "
                     f"{wants[0]}{site}")
    ring_tids = {g.edges[i].tid for i in ring}
    behind = {e.tid for e in g.edges if e.kind == "py_lock" and e.pid == pid
              and e.to_tid in ring_tids and e.tid not in ring_tids}
    clients = sorted({e.pid for e in g.edges if e.to_pid == pid and e.pid != pid
                      and e.kind in ("unix", "tcp", "pipe", "fifo", "store")})
    tail = ""
    if behind:
        n = len(behind)
        tail += f"; {n} more thread{'s wait' if n > 1 else ' waits'} behind them"
    if clients:
        tail += "; " + ", ".join(who(g.procs[c]) for c in clients[:4]) + (
            " wait" if len(clients) > 1 else " waits") + " for it"
    chain = (f"lock-order inversion in {who(proc)}: " + "; ".join(parts) + tail
             + ": take the locks in the same order in every thread")
    first = g.edges[ring[0]]
    return WaitPattern("lock_ring", (pid, *clients), chain, tuple(ring), pid, first.tid)


def _self_lock(g: _Graph) -> WaitPattern | None:
    """A thread waits for a non-reentrant lock that an outer frame of its own stack holds."""
    for i, edge in enumerate(g.edges):
        if edge.kind != "py_lock" or edge.to_tid != edge.tid:
            continue
        proc = g.procs[edge.pid]
        thread = g.threads.get((edge.pid, edge.tid))
        if thread is None or not _blocked(thread):
            continue
        taking = taking_frame(thread)
        python = [f for f in thread.frames if not f.native]
        text = edge.object.split(" (taken at ", 1)[0]
        holder = next((f for f in reversed(python) if f is not taking and text in f.holds),
                      taking)
        frames = python[python.index(taking) if taking in python else 0:]
        below = frames[1] if len(frames) > 1 else None
        held_at = f"{holder.name} ({holder.short_file}:{holder.line})" if holder else "?"
        how = ""
        if below is not None and taking is not None and below.calls and \
                taking.name.rsplit(".", 1)[-1] not in below.calls:
            # The caller's line calls no function of that name: the frame was not called
            # from it but run over it, as CPython runs a signal handler on the main thread.
            how = (f"; {taking.name} runs on top of {below.name} ({below.short_file}:"
                   f"{below.line}), whose line does not call it: a signal handler that "
                   f"interrupted the thread inside the block holding {text}")
        chain = (f"{_thread_words(proc, thread)} deadlocks itself: it waits for {text} at "
                 f"{taking.name if taking else '?'} ({taking.short_file if taking else '?'}:"
                 f"{taking.line if taking else '?'}), which its own outer frame {held_at} holds "
                 f"and cannot release until this wait returns{how}; a threading.Lock is not "
                 "reentrant: do not take it in a signal handler or callback (set a flag, or "
                 "use an RLock)")
        return WaitPattern("self_lock", (proc.pid,), chain, (i,), proc.pid, thread.tid)
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
    """A fork without exec: multiprocessing's fork start method (``popen_fork`` at the bottom
    of the child's stack: the parent's frames, copied), or the parent's command line, and not
    multiprocessing's spawn or forkserver (a fresh interpreter: ``spawn_main``)."""
    if parent is None or any("--multiprocessing-fork" in a or "spawn_main" in a
                             for a in proc.cmdline):
        return False
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    if main is not None and any(not f.native and (f.file or "").endswith(
            "multiprocessing/popen_fork.py") for f in main.frames):
        return True
    return bool(proc.cmdline) and proc.cmdline == parent.cmdline


def _bystander(thread: Thread) -> bool:
    """A thread of a forked child that cannot hold the inherited lock: a helper (a queue's
    feeder, pin memory), a native-only thread, one idling for work in an Event/Condition/Queue
    wait, or one blocked elsewhere whose source holds no lock (it started in the child, after
    the fork, and took none)."""
    return thread.helper or not thread.python or _notified_wait(thread) is not None or (
        thread.category in (Category.IDLE, Category.IPC_WAIT, Category.SLEEP)
        and not any(f.holds for f in thread.frames if not f.native))


def _fork_lock(g: _Graph) -> WaitPattern | None:
    found: list[tuple[Process, Process, Thread]] = []
    for proc in g.snap.processes:
        if proc.is_exited:
            continue
        main = next((t for t in proc.threads if t.tid == proc.pid), None)
        parent = g.procs.get(proc.ppid or 0)
        # The forking thread's copy is the child's main thread: the one the lock wait is on.
        if main is None or not _blocked(main) or not waits_on_lock(main) or not _forked(
                proc, parent):
            continue
        others = [t for t in proc.threads if t.tid != main.tid]
        if not all(_bystander(t) for t in others):
            continue
        taking = taking_frame(main)
        if taking is not None and taking.takes is not None and any(
                t.tid == main.tid for t, _ in held_locks(proc).get(
                    lock_key(taking, taking.takes), [])):
            continue  # its own outer frame holds it: a self-deadlock (_self_lock)
        assert parent is not None
        found.append((proc, parent, main))
    if not found:
        return None
    proc, parent, thread = found[0]
    siblings = [p for p, par, _ in found if par.pid == parent.pid]
    frame = next((f for f in thread.frames if not f.native and f.takes), None) or next(
        (f for f in thread.frames if not f.native), None)
    where = f" at {frame.name} ({frame.short_file}:{frame.line})" if frame else ""
    lock = f" {frame.takes}" if frame is not None and frame.takes else ""
    one = len(siblings) == 1
    them = who(proc) if one else (", ".join(who(p) for p in siblings[:4])
                                  + (f" and {len(siblings) - 4} more" if len(siblings) > 4 else ""))
    helpers = [t for p in siblings for t in p.threads if t.tid != p.pid]
    child = "the child has" if one else "each child has"
    threads = (f"{child} no other thread that could hold it" if not helpers else
               f"{child} only helper threads besides, started after the fork, that cannot "
               "hold it")
    chain = (f"{them}, forked from {who(parent)} without exec, {'waits' if one else 'wait'} "
             f"on the lock{lock}{where}, inherited locked across fork: the thread that held "
             f"it when {parent.pid} forked exists only in {parent.pid}, and {threads}, so "
             "nothing can release it; do not fork while holding a lock (start children "
             "with 'spawn' or 'forkserver', or outside the critical section)")
    waiting = [e.pid for e in g.edges if e.to_pid in {p.pid for p in siblings}
               and e.pid == parent.pid]
    if waiting:
        chain += f"; {who(parent)} waits for {'it' if len(siblings) == 1 else 'them'}"
    return WaitPattern("fork_lock", (*(p.pid for p in siblings), parent.pid), chain, (),
                       proc.pid, thread.tid, tuple(p.pid for p in siblings[1:]))


_FUTURE = ("concurrent/futures/_base.py",)


def _future_wait(thread: Thread) -> Frame | None:
    """The ``concurrent.futures.Future.result``/``wait`` frame a thread blocks in."""
    return next((f for f in thread.frames if not f.native and (f.file or "").endswith(_FUTURE)
                 and f.name.rsplit(".", 1)[-1] in ("result", "exception", "wait")), None)


def _could_produce(thread: Thread) -> bool:
    """A thread that could set an event, fill a queue or complete a future: any thread of the
    process that is not itself idling in such a wait (an executor's idle worker waits on its
    queue; one blocked in recv may be computing the result)."""
    return not thread.helper and thread.python and _notified_wait(thread) is None


def _self_wait(g: _Graph) -> WaitPattern | None:
    """An asyncio loop's thread blocks on a concurrent future that no other thread is
    working on: its work is scheduled on this loop (``run_coroutine_threadsafe``), which
    cannot run it until the wait returns."""
    for proc in g.snap.processes:
        for thread in proc.threads:
            if proc.is_exited or not _blocked(thread) or thread.category is not Category.LOCK:
                continue
            python = [f for f in thread.frames if not f.native]
            waits = _future_wait(thread)
            loop = next((k for k, f in enumerate(python) if "asyncio" in (f.file or "")
                         and f.name.rsplit(".", 1)[-1] in _LOOP), None)
            if waits is None or loop is None or python.index(waits) > loop:
                continue
            if any(_could_produce(t) for t in proc.threads if t.tid != thread.tid):
                continue  # another thread may be computing it: a blocked loop, not a self-wait
            inner = user_frame(thread)
            site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
            chain = (f"the asyncio event loop of {who(proc)} (thread {thread.name or thread.tid})"
                     f" waits for itself: it blocks synchronously in concurrent.futures."
                     f"Future.result(){site}, and no other thread of the process runs "
                     "anything that could complete that future: its coroutine is scheduled "
                     "on this same loop (asyncio.run_coroutine_threadsafe on the loop's own "
                     "thread), which cannot run it until the wait returns; await the "
                     "coroutine instead of blocking on its future")
            return WaitPattern("self_wait", (proc.pid,), chain, (), proc.pid, thread.tid)
    return None


_PRODUCED = {"threading.py": ("wait", "wait_for"), "queue.py": ("get",),
             "concurrent/futures/_base.py": ("result", "exception")}


def _notified_wait(thread: Thread) -> Frame | None:
    """The frame of a thread-to-thread wait (``Event.wait``, ``Condition.wait``, ``Queue.get``,
    ``Future.result``): a thread of the same process must set, notify, put or complete it."""
    python = [f for f in thread.frames if not f.native]
    found = None
    for f in python:  # the outermost plumbing frame: Event.wait over Condition.wait
        file = f.file or ""
        names = next((n for suffix, n in _PRODUCED.items() if file.endswith(suffix)), None)
        if names is None:
            break
        if f.name.rsplit(".", 1)[-1] in names:
            found = f
    return found


def _died(proc: Process) -> list[str]:
    """Threads the process's output says died: threading.excepthook's ``Exception in thread
    NAME:`` line (the thread's traceback follows it)."""
    lines = [*proc.log_errors, *proc.log_tail]
    names = [line.split("Exception in thread ", 1)[1].rstrip(":").strip()
             for line in lines if line.startswith("Exception in thread ")]
    return list(dict.fromkeys(n for n in names if n))


def _orphan_wait(g: _Graph) -> WaitPattern | None:
    """A thread waits for another thread of its process to set an Event, put on a queue or
    complete a future, and none is left that could: the producer died (its traceback in the
    output), or every other thread waits too."""
    for proc in g.snap.processes:
        if proc.is_exited or not proc.threads:
            continue
        for thread in proc.threads:
            frame = _notified_wait(thread)
            if frame is None or thread.helper or not _blocked(thread) or any(
                    "asyncio" in (f.file or "") for f in thread.frames if not f.native):
                continue
            others = [t for t in proc.threads if t.tid != thread.tid and t.python
                      and not t.helper]
            if any(_could_produce(t) for t in others):
                continue  # another thread runs or waits on something else: it may set it
            died = _died(proc)
            waiters = sorted({e.pid for e in g.edges if e.to_pid == proc.pid
                              and e.pid != proc.pid and e.kind != "child"})
            if not died and not waiters:
                continue  # a lone wait nobody needs (a signal handler may end it): not a hang
            inner = user_frame(thread)
            site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
            what = frame.name
            rest = "no other thread of it is left" if not others else (
                f"its {len(others)} other thread{'s wait' if len(others) > 1 else ' waits'} "
                "too")
            chain = (f"{_thread_words(proc, thread)} waits in {what}{site} for another thread "
                     f"to set it, and {rest}: the producer is gone")
            if died:
                chain += (f"; its output says thread {', '.join(died[:3])} died of an "
                          "exception (threading's 'Exception in thread' traceback), before "
                          "it could set it")
            if waiters:
                chain += "; " + ", ".join(who(g.procs[w]) for w in waiters[:3]) + (
                    " wait" if len(waiters) > 1 else " waits") + f" for {who(proc)}"
            chain += ("; wait with a timeout and check the producer thread is_alive(), or "
                      "set the event in a finally")
            return WaitPattern("orphan_wait", (proc.pid, *waiters), chain, (), proc.pid,
                               thread.tid)
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


def _asks(g: _Graph, edge: WaitEdge) -> bool:
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
            "asyncio" in (f.file or "") and f.name.rsplit(".", 1)[-1] in _LOOP for f in python):
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


PATTERNS = (_cycle, _lock_cycle, _self_lock, _self_wait, _orphan_wait, _event_loop, _fork_lock,
            _lost_result, _prompt, _sink)


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
