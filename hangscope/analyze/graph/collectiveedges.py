"""A rank in a collective waits for the ranks of its group that are in none: wait-for edges.

A collective returns only once every rank of its group has called it. When ranks 0 and 2 wait
in ``all_reduce`` and rank 1 waits on something else (a full queue, a lock, a reply), ranks 0
and 2 wait for rank 1: that edge joins the collective to the rest of the wait-for graph, so a
chain that reaches rank 0 goes on to rank 1 and what rank 1 waits on, and a cycle through a
collective (rank 0 holds a file lock in ``barrier`` while rank 1's loader waits for that lock)
closes.

Only ranks that wait elsewhere are joined: a rank that runs (computes, compiles, reads a disk)
is the straggler rules' story (analyze/rules/slow.py), told with its progress. Ranks are
compared within their replica only (a DP replica's TP group: analyze/evidence/identity.py).
"""

from __future__ import annotations

from hangscope.analyze.evidence.identity import replica_key
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.analyze.graph.stackindex import index_of
from hangscope.frameworks import in_task_loop
from hangscope.frameworks.torch_distributed import GLOO_THREADS
from hangscope.model import Category, Process, Role, Snapshot, Thread, category_of
from hangscope.model.waits import WaitEdge
from hangscope.words import verb, who

#: The waits a rank outside every collective can be in for its peers to wait on it.
_ELSEWHERE = frozenset({Category.LOCK, Category.IPC_WAIT, Category.SLEEP, Category.IDLE,
                        Category.SPIN})
_IN = frozenset({Category.COLLECTIVE, Category.COMM_INIT})


def collective_edges(snap: Snapshot) -> list[WaitEdge]:
    """rank in a collective -> each rank of its replica that waits, in no collective."""
    ranks: dict[tuple[tuple[str, int], ...], list[tuple[Process, Category]]] = {}
    for proc in snap.processes:
        if proc.role is not Role.RANK or proc.is_exited or proc.working_thread is None:
            continue
        category = category_of(proc, proc.working_thread)
        ranks.setdefault(replica_key(proc), []).append((proc, category))
    edges: list[WaitEdge] = []
    for members in ranks.values():
        waiting = [p for p, c in members if c is Category.COLLECTIVE]
        elsewhere = [p for p, c in members if c in _ELSEWHERE]
        if not waiting or not elsewhere or any(c not in _IN | _ELSEWHERE for _, c in members):
            continue  # nobody to wait for, or a rank that works: the straggler's story
        for proc in waiting:
            thread = proc.working_thread
            assert thread is not None
            op = thread.op or "a collective"
            for other in elsewhere:
                edges.append(WaitEdge(
                    proc.pid, thread.tid, "collective", f"{op} (rank {_rank(other)} has not "
                    "called it)", "a collective returns only once every rank of its group "
                    "calls it; this rank waits in it, that one in none", other.pid,
                    other.working_tid))
    return [*edges, *thread_edges(snap, edges), *mesh_edges(snap)]


#: How a mesh edge's reason begins (analyze/patterns/ends/groupgap.py finds them by it).
MESH_HOW = "a collective returns only once every member of its group calls it; this process"


def mesh_edges(snap: Snapshot) -> list[WaitEdge]:
    """A process in a collective waits for each member of its group that is no rank of the
    job (its group: the processes connected to it over TCP that run torch's gloo threads)
    and waits elsewhere inside its own program: an engine that set up its own gloo group (no
    RANK), or a trainer that joins a serving rank's weight-update group from its main
    process. Ranks' waits for ranks are :func:`collective_edges`'. Not a member idle in its
    framework's task loop (a Ray actor between tasks): its program makes no more calls, and
    the chain's end says so (:func:`mesh_words`)."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    outside = {p.pid for p in snap.processes if p.role is not Role.RANK
               and any(t.name in GLOO_THREADS for t in p.threads)}
    if kernel is None or not outside:
        return []
    peers: dict[int, set[int]] = {}
    for mine, other, _ in kernel.tcp_pairs():
        peers.setdefault(mine, set()).add(other)
    edges = []
    for proc in snap.processes:
        thread = proc.working_thread
        if proc.is_exited or thread is None or thread.category is not Category.COLLECTIVE \
                or proc.pid not in peers:
            continue
        for pid in sorted(peers[proc.pid]):
            peer = snap.process(pid)
            there = peer.working_thread if peer is not None else None
            if peer is None or peer.is_exited or there is None or pid not in outside or \
                    there.category not in _ELSEWHERE:
                continue
            leaf = next((f for f in there.frames if not f.native), None)
            if leaf is None or in_task_loop(leaf.name, leaf.file):
                continue
            edges.append(WaitEdge(
                proc.pid, thread.tid, "collective", f"{thread.op or 'a collective'} (its peer "
                "in the gloo group, connected over TCP, has not called it)", f"{MESH_HOW} "
                "waits in it, that one, inside its program, in none", peer.pid, there.tid))
    return edges


#: How a peer-thread edge's object names the thread (analyze/graph/waitwalk.py words its hop).
PEER_THREAD = "'s thread "
#: The peers' threads one collective thread gets edges to: a cycle needs one, and a job of
#: 131,072 ranks split in two would otherwise get one edge per pair of ranks.
PEER_EDGES_MAX = 4


def thread_edges(snap: Snapshot, known: list[WaitEdge]) -> list[WaitEdge]:
    """A rank's thread in a group-wide collective waits for the same thread of each other rank
    of its replica (the program's thread of that name: the one that makes that call there)
    where that thread waits elsewhere (a lock, a queue): a snapshot thread in ``all_gather`` on
    its own group waits for the peer's snapshot thread, not for the peer's main thread in
    another collective. One side of each pair is not its rank's working thread (pairs of
    working threads are :func:`collective_edges`'); at most ``PEER_EDGES_MAX`` peers each."""
    # Asked of the distinct sets of stacks first (a handful at 131,072 ranks): some rank must
    # have a Python thread in a collective beside a Python thread waiting elsewhere.
    if not any(_mixed(procs[0]) for _, procs in index_of(snap.processes).groups()):
        return []
    collective: dict[tuple[tuple[str, int], ...], list[tuple[Process, Thread]]] = {}
    elsewhere: dict[tuple[tuple[tuple[str, int], ...], str], list[tuple[Process, Thread]]] = {}
    for proc in snap.processes:
        if proc.role is not Role.RANK or proc.is_exited:
            continue
        for thread in proc.threads:
            if not thread.python or thread.name is None:
                continue
            if thread.category is Category.COLLECTIVE and not is_p2p(thread.op):
                collective.setdefault(replica_key(proc), []).append((proc, thread))
            elif thread.category in _ELSEWHERE:
                elsewhere.setdefault((replica_key(proc), thread.name), []).append(
                    (proc, thread))
    seen = {(e.pid, e.tid, e.to_pid, e.to_tid) for e in known}
    edges: list[WaitEdge] = []
    for replica, members in collective.items():
        for proc, thread in members:
            op = thread.op or "a collective"
            working = thread.tid == proc.working_tid
            peers = [(other, peer) for other, peer in elsewhere.get((replica, thread.name), ())
                     if other is not proc and not (working and peer.tid == other.working_tid)
                     and (proc.pid, thread.tid, other.pid, peer.tid) not in seen]
            edges.extend(WaitEdge(
                proc.pid, thread.tid, "collective",
                f"{op} (rank {_rank(other)}{PEER_THREAD}{thread.name} has not called it)",
                "a collective returns only once every rank of its group calls it; the same "
                "thread of the program makes the call on each rank, and on that rank it waits "
                "elsewhere", other.pid, peer.tid, probable=True)
                for other, peer in peers[:PEER_EDGES_MAX])
    return edges


def _mixed(proc: Process) -> bool:
    """A rank with a Python thread in a collective and another waiting elsewhere."""
    if proc.role is not Role.RANK:
        return False
    kinds = {t.category for t in proc.threads if t.python}
    return Category.COLLECTIVE in kinds and bool(kinds & _ELSEWHERE)


def _rank(proc: Process) -> str:
    info = proc.rank
    return str(info.global_rank) if info is not None and info.global_rank is not None else "?"


def _tcp_peers(snap: Snapshot, pid: int) -> set[int]:
    """The processes of the job holding the other end of one of ``pid``'s TCP connections."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    return {other for mine, other, _ in kernel.tcp_pairs() if mine == pid} if kernel else set()


def mesh_words(snap: Snapshot, proc: Process) -> str:
    """Where a process in a collective that no rank of the job's is (a Ray actor in a
    ``ray.util.collective`` group: no RANK, no collective edges) has its group's other
    members: the processes connected to it over TCP that run a gloo group too (torch's gloo
    threads). Those in no collective are said, and what they do: one idle in its framework's
    loop between tasks will not call it (the collective is one more than its peer's program
    makes); "" where none is known."""
    if proc.role is Role.RANK:
        return ""
    members = [p for pid in sorted(_tcp_peers(snap, proc.pid))
               if (p := snap.process(pid)) is not None and not p.is_exited
               and any(t.name in GLOO_THREADS for t in p.threads)]
    said = []
    for peer in members:
        thread = peer.working_thread
        if thread is None or category_of(peer, thread) in _IN:
            continue
        leaf = next((f for f in thread.frames if not f.native), None)
        if leaf is not None and in_task_loop(leaf.name, leaf.file):
            said.append(f"{who(peer)}, its peer in the gloo group (connected over TCP), is in "
                        f"no collective: it idles between tasks at {leaf.name} "
                        f"({leaf.short_file}:{leaf.line}), so this process calls a collective "
                        "its peer's program never makes (one more on this side)")
        else:
            said.append(f"{who(peer)}, its peer in the gloo group (connected over TCP), is in "
                        f"no collective: it {verb(thread.category or Category.UNKNOWN)}")
    return "; " + "; ".join(said) if said else ""
