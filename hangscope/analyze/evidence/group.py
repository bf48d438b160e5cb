"""Group ranks by what their working thread waits on, and merge their stacks into one tree.

The merged call tree follows LLNL STAT: one node per frame path from the outermost frame in,
each node carrying the set of ranks that pass through it, so ranks that diverge show up as
sibling branches.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

from hangscope.analyze.evidence.identity import AXES, coordinates, rank_label
from hangscope.model import Group, Process, Signature, TreeNode, rank_id, signature_of
from hangscope.words import ascending

_FIRST = operator.itemgetter(0)


def group_ranks(procs: Sequence[Process]) -> tuple[Group, ...]:
    """Ranks that share a signature, largest group first (ties: lowest rank first)."""
    # One pass over the ranks, each rank's process and working thread read once for all a
    # group needs (its number, PID, host; whether any rank has a DP or PP coordinate): at
    # 131,072 ranks a pass costs its reads of memory no cache holds more than its bytecode,
    # and a pass for each (numbers, PIDs, hosts, coordinates) read every rank four more times.
    # A signature is worded once per distinct (state, working thread's classification),
    # never once per rank: 131,072 ranks share a handful.
    lists: dict[tuple[object, ...], _Members] = {}  # that key's signature's members
    buckets: dict[str, _Members] = {}
    meta: dict[str, Signature] = {}
    labelled = False  # some rank has a DP or PP coordinate: "rank 1" alone names two
    for proc in procs:
        pid = proc.pid
        rank = proc.rank
        if rank is None:
            rid = pid
        else:  # (rank_id and RankInfo.replicated, inlined: asked of every rank)
            if not labelled and (rank.dp is not None or rank.pp is not None):
                labelled = True
            rid = rank.global_rank
            if rid is None:
                rid = rank.key
                if rid is None:
                    rid = pid
        working = proc.working_thread
        key = (proc.state,) if working is None else (
            proc.state, working.category, working.op, working.site, working.context)
        members = lists.get(key)
        if members is None:
            signature = signature_of(proc)
            members = buckets.get(signature[0])
            if members is None:
                members = buckets[signature[0]] = ([], [], [], [])
                meta[signature[0]] = signature
            lists[key] = members
        members[0].append(proc)
        members[1].append(rid)
        members[2].append(pid)
        members[3].append(proc.host)
    groups = []
    for text, (members, ids, pids, hosts) in buckets.items():
        _, category, op, site, context = meta[text]
        if labelled:
            ordered = sorted(members, key=_coordinate_order)
            ranks = tuple(rank_id(p) for p in ordered)
        elif ascending(ids):
            ranks = tuple(ids)  # distinct and ascending (a merge's order): sorted already
        else:  # by (rank, PID): sort the pairs, not the processes through a key function
            ranks = tuple(map(_FIRST, sorted(zip(ids, pids, range(len(ids)), strict=True))))
        groups.append(Group(signature=text, category=category, op=op, site=site,
                            ranks=ranks, pids=tuple(pids), context=context, hosts=tuple(hosts),
                            labels=tuple(rank_label(p) for p in ordered) if labelled else ()))
    groups.sort(key=lambda g: (-len(g.ranks), g.ranks))
    return tuple(groups)


#: A group's members as ``group_ranks`` reads them: processes, rank numbers, PIDs, hosts.
_Members = tuple[list[Process], list[int], list[int], list[str | None]]


def _coordinate_order(proc: Process) -> tuple[object, ...]:
    """DP0·TP0, DP0·TP1, DP1·TP0: outermost axis first, unknown coordinates last."""
    coords = coordinates(proc)
    return (*((coords.get(a) is None, coords.get(a) or 0) for a in AXES), proc.pid)


def _frame_label(frame_name: str, location: str, native: bool) -> str:
    return f"{frame_name} [{location}]" if native else f"{frame_name} ({location})"


class _Node:
    __slots__ = ("children", "label", "paths")

    def __init__(self, label: str) -> None:
        self.label = label
        self.paths: set[int] = set()  # the distinct stacks that pass through this node
        self.children: dict[str, _Node] = {}

    def freeze(self, ranks_of: Callable[[frozenset[int]], tuple[int, ...]]) -> TreeNode:
        kids = tuple(child.freeze(ranks_of) for child in self.children.values())
        return TreeNode(frame=self.label, ranks=ranks_of(frozenset(self.paths)),
                        children=tuple(sorted(kids, key=lambda n: (-len(n.ranks), n.ranks))))


def merged_call_tree(procs: Sequence[Process], native: bool = False) -> tuple[TreeNode, ...]:
    """Merge every rank's working-thread stack, outermost frame first, into one tree.

    Native frames are left out by default: they differ in addresses between ranks and hide
    where the Python paths diverge.
    """
    # Ranks that share a stack (the same frames tuple: classify interns them) are inserted
    # once, and a node's ranks are the union of the stacks through it: linear in the ranks,
    # not ranks x frames, for a job of 131,072 ranks with a handful of distinct stacks.
    stacks: dict[object, tuple[object, tuple[str, ...], list[int]]] = {}
    # The stack found last (a fresh object first: no stack, not even (), is it).
    last: tuple[object, tuple[str, ...], list[int]] = (object(), (), [])
    for proc in procs:
        working = proc.working_thread
        rid = rank_id(proc)
        if working is None:
            label = f"<{proc.category}>"
            entry = stacks.get(label)
            if entry is None:
                entry = stacks[label] = (label, (label,), [])
            entry[2].append(rid)
            continue
        frames = working.frames
        if frames is last[0]:  # a rank with its neighbour's stack: no lookup
            last[2].append(rid)
            continue
        entry = stacks.get(id(frames))
        if entry is None or entry[0] is not frames:
            labels = tuple(_frame_label(frame.name, frame.location, frame.native)
                           for frame in reversed(frames) if native or not frame.native)
            entry = stacks[id(frames)] = (frames, labels, [])
        entry[2].append(rid)
        last = entry
    root = _Node("")
    members: list[list[int]] = []
    for _, labels, rids in stacks.values():
        index = len(members)
        members.append(rids)
        node = root
        for label in labels:
            child = node.children.get(label)
            if child is None:
                child = node.children[label] = _Node(label)
            child.paths.add(index)
            node = child
    cache: dict[frozenset[int], tuple[int, ...]] = {}

    def ranks_of(paths: frozenset[int]) -> tuple[int, ...]:
        found = cache.get(paths)
        if found is None:
            found = cache[paths] = tuple(sorted({r for p in paths for r in members[p]}))
        return found

    return root.freeze(ranks_of).children
