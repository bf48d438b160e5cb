"""Walking the wait-for graph: who a thread waits for next, and how a thread is named in a chain.

Pure, over a classified Snapshot and its edges (analyze/graph/waitgraph.py); shared by the
patterns of analyze/patterns/waitpatterns.py and analyze/patterns/threadpatterns.py.
Why one file: a hop's words (``hop``, ``member_notes``) read the graph's edges and indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import cached_property

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.store_key import store_op
from hangscope.analyze.graph.collectiveedges import PEER_THREAD
from hangscope.analyze.graph.liveness import busy
from hangscope.analyze.graph.loopedges import TASK_OF
from hangscope.analyze.graph.owedreply import OWES_REPLY
from hangscope.analyze.graph.queueedges import no_reader
from hangscope.analyze.graph.sites import called_from
from hangscope.analyze.graph.stackindex import Frames, index_of
from hangscope.analyze.graph.threadedges import blocked as _blocked
from hangscope.analyze.graph.threadedges import user_frame
from hangscope.analyze.graph.unread import STOPPED_READING
from hangscope.analyze.graph.waitgraph import edges_from
from hangscope.analyze.graph.zmqedges import SEND_HOW, receive_edge
from hangscope.model import Category, Process, Snapshot, Thread
from hangscope.model.waits import WaitEdge, WaitPattern
from hangscope.words import who, who_many

_NO_THREAD = object()  # Graph._census: the key of live processes without a working thread


class Graph:
    """The edges of one snapshot, by waiter, with its processes and threads."""

    def __init__(self, snap: Snapshot, edges: Sequence[WaitEdge]) -> None:
        self.snap = snap
        self.edges = edges
        self.procs = {p.pid: p for p in snap.processes}
        self.out = edges_from(edges)
        self._kids: dict[int, list[Process]] | None = None
        self.stacks = index_of(snap.processes)  # shared with the findings (same processes)

    @cached_property
    def threads(self) -> dict[tuple[int, int], Thread]:  # built when first asked (rarely)
        return {(p.pid, t.tid): t for p in self.snap.processes for t in p.threads}

    @property
    def exited(self) -> list[Process]:
        """The processes that exited, in snapshot order: the patterns about a death (a crash
        loop, a missed SIGCHLD, a zombie) start from these, one pass for all of them."""
        return self._census[0]

    @property
    def main_locked(self) -> list[Process]:
        """The live processes whose main thread waits on a lock (category LOCK), in order."""
        return self._census[2]

    def live_working(self, outside: Collection[Category]) -> list[Process]:
        """The live processes with a working thread whose category is not in ``outside``, in
        snapshot order (a pattern that starts from those reads no rank in a collective)."""
        by = self._census[1]
        found = [procs for category, procs in by.items()
                 if category is not _NO_THREAD and category not in outside]
        if len(found) < 2:
            return found[0] if found else []
        return [p for p in self.snap.processes if not p.is_exited and (
            w := p.working_thread) is not None and w.category not in outside]

    @cached_property
    def _census(self) -> tuple[list[Process], dict[object, list[Process]], list[Process]]:
        """(exited, live by their working thread's category, ``main_locked``): what several
        patterns start from, sorted out in one pass (each read all 131,072 ranks, ~0.1 s)."""
        exited: list[Process] = []
        by: dict[object, list[Process]] = {}
        locked: list[Process] = []
        last: object = by  # no category yet
        members: list[Process] = []
        for p in self.snap.processes:
            if p.is_exited:
                exited.append(p)
                continue
            working = p.working_thread
            category = working.category if working is not None else _NO_THREAD
            if category is not last:  # (a job's ranks come together: one lookup per run)
                members = by.setdefault(category, [])
                last = category
            members.append(p)
            threads = p.threads  # the main thread is the first, most often: no scan
            main = threads[0] if threads and threads[0].tid == p.pid else next(
                (t for t in threads if t.tid == p.pid), None)
            if main is not None and main.category is Category.LOCK:
                locked.append(p)
        return exited, by, locked

    def having(self, fact: Callable[[Frames], object]) -> list[Process]:
        """The processes with a thread whose stack has ``fact`` (a truthy answer), in snapshot
        order, asked once per distinct set of stacks (analyze/graph/stackindex.py): a pattern
        whose subject needs such a thread looks at these only (issue 36: 131,072 ranks)."""
        return self.stacks.having(fact)

    def has_file(self, suffix: str) -> bool:
        """Whether any Python frame of the job runs in a file ending with ``suffix``: a pattern
        of a library (a Pool, a Manager, an executor) cannot hold in a job whose stacks never
        enter it; skipping it keeps the graph linear in distinct files, not ranks x frames."""
        return self.stacks.has_file(suffix)

    def kids(self, pid: int) -> list[Process]:
        """The processes whose parent is ``pid`` (an index built once: a pattern that looked
        for each process's children among all of them was quadratic in a job's ranks)."""
        if self._kids is None:
            self._kids = {}
            for p in (p for p in self.snap.processes if p.ppid is not None):
                self._kids.setdefault(p.ppid, []).append(p)
        return self._kids.get(pid, [])

    def live_edges(self, pid: int, tid: int | None) -> list[int]:
        """Edges out of a thread still blocked; tid None: out of the process's working thread
        (the thread that says where it is: a pool's reader threads wait for data, they are
        not what the process waits on)."""
        out = self.out.get(pid)
        if not out:
            return []  # most ranks of a large job: asked by every pattern, answered at once
        if tid is None:
            proc = self.procs.get(pid)
            tid = proc.working_tid if proc is not None else None
        found = [i for i in out if self.edges[i].tid == tid
                 and (t := self.threads.get((pid, tid))) is not None and _blocked(t)]
        # Another process before its own; a thread that itself waits before an idle one.
        found.sort(key=lambda i: (self.edges[i].to_pid == pid and self.edges[i].to_tid is None,
                                  not self._waits(self.edges[i])))
        return found

    def _onward(self, out: list[int], behind: set[int]) -> int:
        """Of the first wait's alternatives (a pipe or socket end that several processes
        hold: any of them could end it), the first holder that waits onward, on none of the
        processes ``behind`` on the walk: one that waits back on its waiter is stuck because
        of it, so it says nothing of why the waiter is stuck (a coordinator reading a result
        queue every worker inherited: the idle worker waits for the coordinator's next task,
        the busy one is blocked writing its own child's pipe). A writer's leave out holders
        that are no readers (queueedges ``no_reader``: a sibling writer of its queue); with
        none onward, the first reader waits back: a cycle (a parent joining undrained)."""
        first = self.edges[out[0]]
        alternatives = [i for i in out if self.edges[i].object == first.object
                        and self.edges[i].fd == first.fd and self.edges[i].to_pid is not None]
        if len(alternatives) < 2:
            return out[0]
        readers = [i for i in alternatives if not no_reader(self.edges[i], self.procs)]
        alternatives = readers or alternatives
        for i in alternatives:
            edge = self.edges[i]
            assert edge.to_pid is not None
            onward = self.live_edges(edge.to_pid, edge.to_tid)
            if onward and not any(self.edges[j].to_pid in behind for j in onward):
                return i
        return alternatives[0]

    def _waits(self, edge: WaitEdge) -> bool:
        if edge.to_pid is None:
            return True
        if edge.to_tid is None:
            return edge.to_pid != edge.pid
        return any(self.edges[i].tid == edge.to_tid for i in self.out.get(edge.to_pid, []))

    def walk(self, pid: int, tid: int | None) -> tuple[list[int], int | None]:
        """Follow the first wait from (pid, tid): (edges followed, index where a cycle
        starts in that list, or None: it ended at a sink)."""
        if not self.out.get(pid):
            return [], None  # no wait out of it (most ranks of a large job): as live_edges says
        path: list[int] = []
        seen: dict[tuple[int, int | None], int] = {}
        node: tuple[int, int | None] = (pid, tid)
        while True:
            out = self.live_edges(*node)
            if not out:
                return path, None
            chosen = self._onward(out, {e.pid for e in map(self.edges.__getitem__, path)}
                                  | {node[0]})
            edge = self.edges[chosen]
            here = (edge.pid, edge.tid)
            if here in seen:
                return path, seen[here]
            seen[here] = len(path)
            path.append(chosen)
            if edge.to_pid is None or edge.to_pid not in self.procs or (
                    edge.to_pid == edge.pid and edge.to_tid is None):
                return path, None  # outside the job, or its own process holds the other end
            node = (edge.to_pid, edge.to_tid)


def hops_into(g: Graph, into: Sequence[int]) -> str:
    """``; PID 5 is blocked reading pipe 9, which only PID 7 writes; ...``: the edges of
    :func:`waits_into` in their own words, as a clause to append ("" for none)."""
    return "".join("; " + hop(g, i) for i in into)


def waits_into(g: Graph, pid: int) -> tuple[list[int], list[int]]:
    """The other processes that wait on ``pid`` (not its parent's child wait), and the first
    edge of each of the first three onto it: what they wait on, in their own words."""
    # (a helper's wait, the resource tracker reading the pipe every process holds, is how it
    # always waits: it waits on nobody in particular)
    waiters = sorted({e.pid for e in g.edges if e.to_pid == pid and e.pid != pid
                      and e.kind != "child" and g.procs[e.pid].role not in HELPER_ROLES})
    into = [next(i for i, e in enumerate(g.edges) if e.pid == w and e.to_pid == pid
                 and e.kind != "child") for w in waiters[:3]]
    return waiters, into


def thread_names(threads: Sequence[Thread]) -> str:
    """``thread render-0``; ``5 threads (render-0, render-1, render-2 and 2 more)``."""
    if len(threads) == 1:
        return f"thread {threads[0].name or threads[0].tid}"
    shown = ", ".join(str(t.name or t.tid) for t in threads[:3])
    more = f" and {len(threads) - 3} more" if len(threads) > 3 else ""
    return f"{len(threads)} threads ({shown}{more})"


def thread_words(proc: Process, thread: Thread | None) -> str:
    if thread is None or len([t for t in proc.threads if t.python]) <= 1:
        return who(proc)
    return f"thread {thread.name or thread.tid} of {who(proc)}"


def site_words(thread: Thread | None) -> str:
    if thread is None:
        return ""
    if thread.site:  # the user's line that called into the wait (classify.py)
        return f" at {thread.site}" + called_from(thread)
    frame = user_frame(thread)
    if frame is not None:
        return f" at {frame.name} ({frame.short_file}:{frame.line})"
    return f" at {thread.site}" if thread.site else ""


def hop(g: Graph, i: int, together: Sequence[int] = ()) -> str:
    """One edge as a clause: ``PID 9 waits for child 10 (wait4) at run (x.py:3)``;
    ``together``: the edges of other processes waiting the same way (a store key)."""
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
        holders = _end_holders(g, i)
        if len(holders) > 1:
            them = " and ".join(who(g.procs[pid]) for pid in holders)
            other = other[:-1]  # "which only A and B write"
        polled = _polled_with(g, edge, holders)
        if polled:
            what = f"pipes {what.removeprefix('pipe ')} and {' and '.join(polled)}"
        clause = f"{me} is blocked {doing} {what}{site}, which only {them} {other}"
        return clause + (_outlived(g, edge, holders, len(polled) + 1) if doing == "reading"
                         else "")
    if edge.kind == "thread":
        holder = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        if edge.object.startswith(TASK_OF):
            return (f"{me} waits in Future.result(){site} for the thread-pool task that "
                    f"{thread_words(proc, holder)} runs")
        if "hand-off" in edge.how:  # analyze/graph/handoffedges.py
            call = edge.how.partition("()")[0]
            return (f"{me} waits in {call}(){site} for what {thread_words(proc, holder)} "
                    "hands it (probably: the only thread of it waiting on another process)")
        return f"{me} joins {thread_words(proc, holder)}{site}"
    if edge.kind == "queue_lock":
        holder = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        owner = thread_words(target, holder) if target is not None else them
        return (f"{me} waits for {edge.object}{site}, probably held by {owner}, the other "
                "writer of that queue, inside its write")
    if edge.kind == "queue":
        return (f"{me} waits to put into a full multiprocessing.Queue{site}, which {them} "
                "reads")
    if edge.kind == "collective":
        op = edge.object.split(" (")[0]
        if PEER_THREAD in edge.object:  # (collectiveedges.thread_edges) the peer's same thread
            peer = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
            peer_words = thread_words(target, peer) if target is not None else them
            return (f"{me} waits in {op}{site} for {peer_words}, which makes that call on "
                    "its rank and waits elsewhere")
        return f"{me} waits in {op}{site} for {them}, which is in no collective"
    if edge.kind == "loop":
        holder = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        return (f"{me} waits in Future.result(){site} for a future that only the asyncio "
                f"event loop of {thread_words(proc, holder)} can complete "
                "(run_coroutine_threadsafe)")
    if edge.kind in ("gil", "py_lock"):
        holder = g.threads.get((edge.to_pid or 0, edge.to_tid or 0))
        peers = [e for e in g.edges if e.kind == edge.kind and e.pid == edge.pid
                 and e.to_tid == edge.to_tid]
        if len(peers) > 1:
            me = f"{len(peers)} threads of {who(proc)}"
        waits = "wait" if len(peers) > 1 else "waits"
        if edge.kind == "gil":
            return f"{me} {waits} for the GIL, which {thread_words(proc, holder)} owns"
        held = "probably held by" if edge.probable else "held by"
        return (f"{me} {waits} for {edge.object}, {held} "
                f"{thread_words(proc, holder)} ({edge.how})")
    if edge.kind == "file_lock":
        return f"{me} waits for the {edge.object}{site}, held by {them}"
    if edge.kind == "terminal":
        return f"{me} {'writes to' if sends(edge) else 'reads'} {edge.object}{site}"
    if edge.kind == "store":
        return _store_hop(g, i, together, them)
    if edge.kind in ("unix", "tcp"):
        doing = "to send on" if sends(edge) else "for a message on" if receive_edge(
            edge) else "for a reply on"
        if target is not None and edge.to_tid is not None:
            them = thread_words(target, g.threads.get((target.pid, edge.to_tid)))
        if "accept queue" in edge.how:
            return (f"{me} waits {doing} {edge.object}{site}, from {them}, which has not even "
                    "accepted that connection (it waits in the accept queue of its listening "
                    "socket)")
        if STOPPED_READING in edge.how:
            return f"{me} waits {doing} {edge.object}{site}, to {them}, which stopped reading it"
        if OWES_REPLY in edge.how:
            return (f"{me} waits for the reply on {edge.object}{site}, from {them}, which read "
                    "the whole request and has sent nothing since")
        return f"{me} waits {doing} {edge.object}{site}, {'to' if sends(edge) else 'from'} {them}"
    return f"{me} waits on {edge.object}{site} for {them}"


def store_keys(g: Graph, pid: int) -> tuple[str, ...]:
    """The keys ``pid``'s store get/wait waits for, as its --locals said (evidence/store_key)."""
    waits = g.snap.waits
    read = next((r for r in waits.locals if r.pid == pid), None) if waits is not None else None
    return read.store_keys if read is not None else ()


def store_peers(g: Graph, i: int) -> list[int]:
    """The store edges of other processes' working threads waiting as edge ``i`` does: on the
    same store, at the same line, for the same keys (ranks 1-3 in one ``store.get``)."""
    edge = g.edges[i]
    if edge.kind != "store":
        return []
    site = site_words(g.threads.get((edge.pid, edge.tid)))
    keys = store_keys(g, edge.pid)
    found = []
    for pid in sorted(g.out):
        if pid == edge.pid:
            continue
        for k in g.live_edges(pid, None)[:1]:
            e = g.edges[k]
            if (e.kind, e.to_pid, e.object) == ("store", edge.to_pid, edge.object) and site_words(
                    g.threads.get((e.pid, e.tid))) == site and store_keys(g, pid) == keys:
                found.append(k)
    return found


def _store_hop(g: Graph, i: int, together: Sequence[int], them: str) -> str:
    edge = g.edges[i]
    thread = g.threads.get((edge.pid, edge.tid))
    procs = [g.procs[g.edges[k].pid] for k in (i, *together)]
    me = who_many(procs) if len(procs) > 1 else thread_words(procs[0], thread)
    op = store_op(thread)
    call = f"TCPStore.{op}" if op else "TCPStore get/wait"
    keys = store_keys(g, edge.pid)
    what = (f"for key {keys[0]!r}" if len(keys) == 1 else
            f"for keys {', '.join(map(repr, keys))}" if keys else "for a key")
    # A rank whose own line calls the store waits outside any collective: a collective's
    # own store waits (a store-based barrier) sit under a torch.distributed frame.
    inner = next((f for f in thread.frames if not f.native), None) if thread else None
    outside = (", outside any collective" if all(p.rank is not None for p in procs)
               and inner is not None and "torch/distributed/" not in (inner.file or "") else "")
    waits = "wait" if len(procs) > 1 else "waits"
    return (f"{me} {waits} in {call} {what} of {edge.object}{site_words(thread)}{outside}, "
            f"which {them} serves and nobody has set")


def sends(edge: WaitEdge) -> bool:
    """The edge's thread is blocked writing its fd (``write``/``send*``, a zmq send its peer
    does not take), not reading it."""
    return edge.how.startswith(("write", "send", SEND_HOW))


def _polled_with(g: Graph, edge: WaitEdge, holders: list[int]) -> list[str]:
    """The other pipes one poll waits on whose other end the same processes hold (a child's
    stdout and stderr, read by communicate()): all of them are what it waits on."""
    if edge.kind != "pipe" or not edge.how.startswith(("poll", "ppoll")):
        return []
    end = edge.object[edge.object.index(" ("):]
    same = set(holders) or {edge.to_pid}
    found: dict[str, set[int | None]] = {}
    for e in g.edges:
        if (e.pid, e.tid, e.kind) == (edge.pid, edge.tid, "pipe") and e.object != edge.object \
                and e.object.endswith(end):
            found.setdefault(e.object, set()).add(e.to_pid)
    return [obj.split(" (")[0].removeprefix("pipe ") for obj, pids in found.items()
            if pids == same]


def _end_holders(g: Graph, i: int) -> list[int]:
    """Every live process of the job holding the other end of edge ``i``'s pipe or FIFO
    (its edges out of the same thread on the same object), in order."""
    edge = g.edges[i]
    ends = [e for e in g.edges if (e.pid, e.tid, e.object) == (edge.pid, edge.tid, edge.object)
            and e.to_pid is not None and e.to_pid != edge.pid
            and (p := g.procs.get(e.to_pid)) is not None and not p.is_exited]
    # A writer's "which only X reads" names the readers: not a sibling writer of the queue
    readers = [e for e in ends if not no_reader(e, g.procs)]
    return list(dict.fromkeys(e.to_pid for e in readers or ends if e.to_pid is not None))


def _outlived(g: Graph, edge: WaitEdge, holders: list[int], pipes: int = 1) -> str:
    """The reader's children have exited while processes that are not its children hold the
    write end: they inherited it from the child (a daemon a shell started with ``&``), so
    the EOF the reader waits for (``communicate()``, ``for line in pipe``) never comes."""
    gone = [p for p in g.snap.processes if p.ppid == edge.pid and p.is_exited]
    strays = [g.procs[pid] for pid in holders if g.procs[pid].ppid != edge.pid]
    if not gone or not strays:
        return ""
    kids = ", ".join(f"PID {p.pid}" + (f" ({p.cmdline[0]})" if p.cmdline else "") for p in gone)
    codes = {p.exit_code for p in gone}
    code = f" with code {codes.pop()}" if len(codes) == 1 and None not in codes else ""
    zombie = ", a zombie not reaped yet" if all(p.is_zombie for p in gone) else ""
    held = "; ".join(f"{who(p)}, " + (f"a child of PID {p.ppid}" if p.ppid in g.procs
                                       else f"reparented to PID {p.ppid}") for p in strays)
    return (f": it waits for EOF, but its child {kids} already exited{code}{zombie}, and "
            f"{held}, inherited the write {'ends' if pipes > 1 else 'end'} and keeps "
            f"{'them' if pipes > 1 else 'it'} open, so no EOF ever comes "
            "(redirect the background process's output, or stop reading once the child exits)")


def ends_elsewhere(g: Graph, ring: Sequence[int]) -> bool:
    """A wait of ``ring`` has another way out: the same thread's wait on the same object also
    leads to a process outside the ring that works (a socket end or a pipe end inherited by a
    forked sibling while its real holder computes): any holder may end it, and one is busy."""
    members = {g.edges[i].pid for i in ring}
    for i in ring:
        edge = g.edges[i]
        if any((other := g.edges[j]).tid == edge.tid and other.object == edge.object
               and other.to_pid not in members and busy(g, other.to_pid)
               for j in g.out.get(edge.pid, [])):
            return True
    return False


def member_notes(g: Graph, pattern: WaitPattern) -> str:
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
