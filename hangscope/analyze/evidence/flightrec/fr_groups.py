"""Flight Recorder process groups: every rank's dump gathered per group (name and members).

Pure, the first step of analyze/evidence/flightrec/collectives_fr.py. A group is its name *and* its
members:
``split_group`` gives disjoint groups one name, and each rank sees only its own. Where a dump
lists no members (gloo registers one unnamed config, ``''``), the members are the ranks whose
dumps hold the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hangscope.model import nccl as ev


def rank_names(ranks: Sequence[int], global_ranks: bool = True) -> str:
    """``rank 3``, ``ranks 0, 1 and 2`` (``communicator rank`` for ranks within a communicator)."""
    word = "rank" if global_ranks else "communicator rank"
    if len(ranks) == 1:
        return f"{word} {ranks[0]}"
    return f"{word}s {', '.join(map(str, ranks[:-1]))} and {ranks[-1]}"


@dataclass
class Pg:
    """One process group (name and members) seen through every dump that holds it."""

    name: str
    members: tuple[int, ...] = ()
    desc: str | None = None
    label_members: bool = False  # another group shares the name: say whose this one is
    groups: dict[int, ev.FrGroup] = field(default_factory=dict)  # global rank -> its view
    seqs: dict[int, dict[int, list[ev.FrEntry]]] = field(default_factory=dict)  # rank->seq->
    p2p: dict[int, list[ev.FrEntry]] = field(default_factory=dict)  # rank -> p2p ops in order
    wrapped: set[int] = field(default_factory=set)  # ranks whose ring buffer lost its start

    @property
    def id(self) -> str:
        return f"{self.name}[{','.join(map(str, self.members))}]" if self.label_members \
            else self.name

    @property
    def label(self) -> str:
        return (f"process group {self.name}" + (f" ({self.desc})" if self.desc else "")
                + (f" of {rank_names(self.members)}" if self.label_members else ""))

    @property
    def ranks(self) -> list[int]:
        return sorted(self.seqs.keys() | self.groups.keys() | self.p2p.keys())

    def last(self, rank: int) -> int | None:
        group = self.groups.get(rank)
        if group is not None and group.last_enqueued is not None and group.last_enqueued >= 0:
            return group.last_enqueued
        seqs = self.seqs.get(rank, {})
        return max(seqs) if seqs else None

    def reached(self, rank: int) -> int | None:
        """:meth:`last`, or 0 where the rank's dump holds the group and no entry of it and
        lost none (its ring buffer did not wrap, or its status says nothing was enqueued): a
        rank stopped before the group's first collective has not reached #1."""
        last = self.last(rank)
        group = self.groups.get(rank)
        if last is not None or group is None:
            return last
        return 0 if group.last_enqueued == -1 or rank not in self.wrapped else None


def process_groups(dumps: Sequence[ev.FrDump]) -> list[Pg]:
    """Every group of the dumps, keyed by (name, members)."""
    known: dict[str, set[tuple[int, ...]]] = {}
    for dump in dumps:
        for g in dump.groups:
            if g.ranks:
                known.setdefault(g.name, set()).add(tuple(g.ranks))

    def key(rank: int, name: str, listed: tuple[int, ...]) -> tuple[str, tuple[int, ...] | None]:
        if listed:
            return name, listed
        mine = [m for m in known.get(name, ()) if rank in m]
        return name, (mine[0] if len(mine) == 1 else None)

    pgs: dict[tuple[str, tuple[int, ...] | None], Pg] = {}
    for dump in dumps:
        own: dict[str, tuple[str, tuple[int, ...] | None]] = {}
        for g in dump.groups:
            k = own[g.name] = key(dump.rank, g.name, g.ranks)
            pg = pgs.setdefault(k, Pg(g.name, k[1] or ()))
            pg.groups[dump.rank] = g
            pg.desc = pg.desc or g.desc
        records = [e.record_id for e in dump.entries if e.record_id is not None]
        wrapped = bool(records) and min(records) > 0
        if wrapped:  # every group of the dump, also one whose entries were all lost
            for k in own.values():
                pgs[k].wrapped.add(dump.rank)
        # The entries' group name -> that group's seq -> entries on this rank: looked up once
        # per group, not once per entry (a dump holds 2,000 entries of a handful of groups).
        rank_seqs: dict[str, dict[int, list[ev.FrEntry]]] = {}
        for entry in dump.entries:
            if entry.p2p or entry.pg not in rank_seqs:
                k = own.get(entry.pg) or own.setdefault(entry.pg, key(dump.rank, entry.pg, ()))
                pg = pgs.get(k) or pgs.setdefault(k, Pg(entry.pg, k[1] or ()))
                if wrapped:
                    pg.wrapped.add(dump.rank)
                if entry.p2p:
                    pg.p2p.setdefault(dump.rank, []).append(entry)
                    continue
                rank_seqs[entry.pg] = pg.seqs.setdefault(dump.rank, {})
            seqs = rank_seqs[entry.pg]
            same = seqs.get(entry.seq)
            if same is None:
                seqs[entry.seq] = [entry]
            else:
                same.append(entry)
    for (_, listed), pg in pgs.items():
        if listed is None:  # gloo: no member list anywhere; the ranks that hold the group
            pg.members = tuple(pg.ranks)
    names: dict[str, int] = {}
    for pg in pgs.values():
        names[pg.name] = names.get(pg.name, 0) + 1
    for pg in pgs.values():
        pg.label_members = names[pg.name] > 1
    return sorted(pgs.values(), key=lambda p: (p.name, p.members))
