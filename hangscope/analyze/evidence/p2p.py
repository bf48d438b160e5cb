"""Point-to-point waits: who each rank waits for in send/recv, and the cycles that never end.

Pure functions; no I/O. A rank blocked in ``recv`` (or a blocking ``send``: gloo waits for the
receiver, NCCL for the peer's kernel) waits for exactly one peer, unlike a collective, which
waits for the whole group. The peer is read from py-spy ``--locals`` on the
``torch/distributed/distributed_c10d.py`` frame (``src``/``dst``, ``group_src``/``group_dst``,
``tag``): ``py-spy dump --locals --json --pid PID``, ~10 ms on a CPU rank here, asked only of
ranks whose working thread is in a p2p op.

The wait-for graph has an edge from each p2p rank to its peer. A send and a recv that name each
other are a matched pair (both complete: a healthy pipeline caught mid-step, never a
mismatch). A chain of unmatched edges that closes is a p2p deadlock; one that ends at a rank
that is not in p2p (or not there at all) points at that rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hangscope.analyze.evidence.pylocals import as_int, frame_locals, thread_frames
from hangscope.analyze.evidence.signatures import is_p2p, op_from_name
from hangscope.model import Category, Process
from hangscope.model.waits import P2PCall


def p2p_call(frames: Sequence[Mapping[str, object]]) -> P2PCall | None:
    """The p2p call of one thread from py-spy ``--locals`` JSON frames (innermost first).

    The outermost c10d frame is the user's call (``send`` calls ``isend`` inside, with the
    default group filled in); a peer it leaves unset is taken from the frames inside it.
    """
    calls = []
    for frame in frames:
        op = op_from_name(str(frame.get("name") or ""))
        if op in ("send", "recv") and "torch/distributed/distributed_c10d.py" in str(
                frame.get("filename") or ""):
            calls.append((op, frame_locals(frame)))
    if not calls:
        return None
    op, outer = calls[-1]
    arg = "src" if op == "recv" else "dst"

    def first(name: str) -> int | None:
        return next((v for _, loc in reversed(calls) if (v := as_int(loc.get(name))) is not None),
                    None)

    group = outer.get("group")
    return P2PCall(op=op, peer=first(arg), group_peer=first(f"group_{arg}"),
                   tag=as_int(outer.get("tag")),
                   group=None if group in (None, "None") else str(group))


#: The collectives with one root, and the argument that names it (c10d's ``src``/``dst``;
#: its ``group_src``/``group_dst`` the same rank by its place in the group).
ROOTED = {"broadcast": "src", "broadcast_object_list": "src", "scatter": "src",
          "scatter_object_list": "src", "gather": "dst", "gather_object": "dst",
          "reduce": "dst"}


def in_rooted(proc: Process) -> bool:
    """Its working thread waits in a collective with one root (its root is worth a read)."""
    thread = proc.working_thread
    return thread is not None and thread.category is Category.COLLECTIVE and thread.op in ROOTED


def rooted_root(threads: Sequence[object], tid: int | None) -> int | None:
    """The root that thread ``tid``'s rooted collective names (the outermost c10d frame of
    that op, its ``src``/``dst``, else its ``group_src``/``group_dst``), from ``--locals``."""
    found = None
    for frame in thread_frames(threads, tid):
        name = str(frame.get("name") or "")
        arg = ROOTED.get(name)
        if arg and "torch/distributed/distributed_c10d.py" in str(frame.get("filename") or ""):
            values = frame_locals(frame)
            root = as_int(values.get(arg))
            found = root if root is not None else as_int(values.get(f"group_{arg}"))
    return found


def in_p2p(proc: Process) -> bool:
    """Its working thread waits in send or recv (batch_isend_irecv: peers not readable)."""
    thread = proc.working_thread
    return thread is not None and thread.category is Category.COLLECTIVE and thread.op in (
        "send", "recv")


def p2p_call_of_thread(threads: Sequence[object], tid: int | None) -> P2PCall | None:
    """The p2p call of thread ``tid`` (the working thread) in ``py-spy dump --locals --json``."""
    return p2p_call(thread_frames(threads, tid))


@dataclass(frozen=True)
class P2PGraph:
    """What the wait-for graph of the p2p ranks says; every number is a global rank."""

    cycles: tuple[tuple[int, ...], ...] = ()  # each in wait order: r0 waits for r1 ... for r0
    points_at: tuple[tuple[tuple[int, ...], int], ...] = ()  # (waiting ranks, the rank elsewhere)
    matched: tuple[tuple[int, int], ...] = ()  # (sender, receiver) pairs that name each other
    unknown_peer: tuple[int, ...] = ()  # p2p ranks whose peer could not be read

    @property
    def deadlocked(self) -> bool:
        return bool(self.cycles)


def _matches(a: P2PCall, rank_a: int, b: P2PCall, rank_b: int) -> bool:
    return a.peer == rank_b and b.peer == rank_a and {a.op, b.op} == {"send", "recv"} and (
        a.tag == b.tag or None in (a.tag, b.tag))


def p2p_graph(calls: Mapping[int, P2PCall], ranks: Sequence[int]) -> P2PGraph:
    """Build the wait-for graph of ``calls`` (rank -> its pending p2p call); ``ranks``: all found.

    A rank waiting for a peer outside ``calls`` (elsewhere, or missing from ``ranks``) is
    reported in ``points_at``; the caller says where that rank is.
    """
    matched: list[tuple[int, int]] = []
    paired: set[int] = set()
    for rank, call in sorted(calls.items()):
        peer = call.peer
        if peer is None or rank in paired or peer in paired or peer not in calls:
            continue
        if _matches(call, rank, calls[peer], peer):
            sender, receiver = (rank, peer) if call.op == "send" else (peer, rank)
            matched.append((sender, receiver))
            paired.update((rank, peer))
    edges = {r: c.peer for r, c in calls.items() if r not in paired and c.peer is not None}
    cycles: list[tuple[int, ...]] = []
    seen: set[int] = set()
    for start in sorted(edges):
        path: list[int] = []
        node: int | None = start
        while node is not None and node in edges and node not in seen and node not in path:
            path.append(node)
            node = edges[node]
        if node is not None and node in path:  # the walk closed on itself: a cycle
            cycle = path[path.index(node):]
            low = cycle.index(min(cycle))
            cycles.append(tuple(cycle[low:] + cycle[:low]))
        seen.update(path)
    pointed: dict[int, list[int]] = {}
    for rank, peer in sorted(edges.items()):
        if peer not in calls:  # the peer is not in p2p: elsewhere, or not there at all
            pointed.setdefault(peer, []).append(rank)
    unknown = tuple(sorted(r for r, c in calls.items() if c.peer is None))
    return P2PGraph(cycles=tuple(cycles),
                    points_at=tuple((tuple(w), p) for p, w in sorted(pointed.items())),
                    matched=tuple(matched), unknown_peer=unknown)


def _arrow(rank: int, call: P2PCall) -> str:
    verb = "receive from" if call.op == "recv" else "send to"
    tag = f" with tag {call.tag}" if call.tag else ""  # (0, the default, goes unsaid)
    return f"rank {rank} waits to {verb} rank {call.peer}{tag}"


def _tag_mismatches(calls: Mapping[int, P2PCall]) -> list[tuple[int, int]]:
    """(sender, receiver) of each send whose receiver waits to receive from it with another
    tag: the pair that should meet and cannot (gloo and NCCL match a send and a receive on
    both the peer and the tag)."""
    out = []
    for rank, call in sorted(calls.items()):
        other = calls.get(call.peer) if call.op == "send" and call.peer is not None else None
        if other is not None and other.op == "recv" and other.peer == rank and (
                call.tag is not None and other.tag is not None and call.tag != other.tag):
            out.append((rank, call.peer))
    return out


def describe_cycle(cycle: Sequence[int], calls: Mapping[int, P2PCall]) -> str:
    """``Point-to-point deadlock among ranks 0, 1, 2: rank 0 waits to receive from rank 2, ...``."""
    members = ", ".join(str(r) for r in cycle)
    steps = "; ".join(_arrow(r, calls[r]) for r in cycle)
    ops = {calls[r].op for r in cycle}
    why = {frozenset({"recv"}): "every rank receives first and none sends",
           frozenset({"send"}): "every rank sends first and none receives"}.get(
        frozenset(ops), "each waits for the next")
    pairs = _tag_mismatches({r: calls[r] for r in cycle})
    if pairs:
        why = "; ".join(f"rank {a} sends with tag {calls[a].tag} and rank {b} receives with "
                        f"tag {calls[b].tag}" for a, b in pairs)
        why += ": a send meets only a receive of its own tag, so neither completes"
    return f"Point-to-point deadlock among ranks {members}: {steps} ({why})."


def describe_points_at(waiters: Sequence[int], peer: int, calls: Mapping[int, P2PCall],
                       where: str | None) -> str:
    """``rank 1 waits to receive from rank 0, which is in sleep at f (x.py:3)``."""
    head = "; ".join(_arrow(r, calls[r]) for r in waiters)
    if where is None:
        return f"{head}, which is not running (missing from the job)."
    return f"{head}, which is {where}."


def all_p2p(ops: Mapping[int, str | None]) -> bool:
    """Every rank waits in a p2p op (rank -> op): no group-wide collective to compare."""
    return bool(ops) and all(is_p2p(op) for op in ops.values())
