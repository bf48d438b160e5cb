"""The Flight Recorder half of analyze/collectives.py: process groups from per-rank dumps.

Pure. Ranks here are global ranks (a dump is named after its rank's global rank; a group's
members are listed in global ranks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hangscope import evidence as ev


def rank_names(ranks: Sequence[int], global_ranks: bool = True) -> str:
    """``rank 3``, ``ranks 0, 1 and 2`` (``communicator rank`` for ranks within a communicator)."""
    word = "rank" if global_ranks else "communicator rank"
    if len(ranks) == 1:
        return f"{word} {ranks[0]}"
    return f"{word}s {', '.join(map(str, ranks[:-1]))} and {ranks[-1]}"


def _at(entry: ev.FrEntry | None) -> str:
    if entry is None:
        return "?"
    return entry.op + (f" at {entry.site}" if entry.site else "")


def _key(entry: ev.FrEntry) -> tuple[str, tuple[tuple[int, ...], ...], tuple[str, ...]]:
    return (entry.op, entry.input_sizes, entry.input_dtypes)


class _Pg:
    """One process group seen through every dump that mentions it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.desc: str | None = None
        self.members: tuple[int, ...] = ()
        self.groups: dict[int, ev.FrGroup] = {}  # global rank -> its view
        self.entries: dict[int, dict[int, ev.FrEntry]] = {}  # global rank -> seq -> entry

    @property
    def label(self) -> str:
        return f"process group {self.name}" + (f" ({self.desc})" if self.desc else "")

    def last(self, rank: int) -> int | None:
        group = self.groups.get(rank)
        if group is not None and group.last_enqueued is not None and group.last_enqueued >= 0:
            return group.last_enqueued
        seqs = self.entries.get(rank, {})
        return max(seqs) if seqs else None


def _groups(dumps: Sequence[ev.FrDump]) -> dict[str, _Pg]:
    pgs: dict[str, _Pg] = {}
    for dump in dumps:
        for group in dump.groups:
            pg = pgs.setdefault(group.name, _Pg(group.name))
            pg.groups[dump.rank] = group
            pg.desc = pg.desc or group.desc
            pg.members = pg.members or group.ranks
        for entry in dump.entries:
            if entry.p2p:
                continue
            pg = pgs.setdefault(entry.pg, _Pg(entry.pg))
            pg.entries.setdefault(dump.rank, {})[entry.seq] = entry
    return pgs


def _disagreement(pg: _Pg) -> ev.Disagreement | None:
    """The first sequence id every dump holds at which the ranks' collectives differ."""
    views = [pg.entries[r] for r in sorted(pg.entries)]
    if len(views) < 2:
        return None
    common = set.intersection(*(set(v) for v in views))
    for seq in sorted(common):
        by_key: dict[tuple, list[int]] = {}
        for rank in sorted(pg.entries):
            by_key.setdefault(_key(pg.entries[rank][seq]), []).append(rank)
        if len(by_key) < 2:
            continue
        keys = list(by_key)
        what = ("op" if len({k[0] for k in keys}) > 1 else
                "sizes" if len({k[1] for k in keys}) > 1 else "dtype")
        sides = []
        for key, ranks in by_key.items():
            entry = pg.entries[ranks[0]][seq]
            sides.append(ev.Side(ranks=tuple(ranks), op=key[0], sizes=key[1], dtypes=key[2],
                                 site=entry.site))
        return ev.Disagreement(seq=seq, what=what, sides=tuple(sides))
    return None


def _conclusions(pg: _Pg, live: Mapping[int, int] | None,
                 missing: Sequence[ev.MissingRank],
                 disagreement: ev.Disagreement | None) -> list[ev.Conclusion]:
    out: list[ev.Conclusion] = []
    if missing:
        ranks = [m.global_rank for m in missing if m.global_rank is not None]
        out.append(ev.Conclusion(
            kind=ev.MISSING, communicator=pg.name, ranks=tuple(ranks), source=ev.SOURCE_FR,
            sentence=f"{rank_names(ranks).capitalize()} of {pg.label} "
                     f"{'has' if len(ranks) == 1 else 'have'} no live process ("
                     + "; ".join(f"rank {m.global_rank}: {m.reason}" for m in missing)
                     + ") (Flight Recorder group members)."))
    if disagreement is not None:
        smallest = min(len(s.ranks) for s in disagreement.sides)
        suspects = [r for s in disagreement.sides if len(s.ranks) == smallest for r in s.ranks]
        parts = [f"{rank_names(s.ranks)} called {s.op}"
                 + (f" of {list(map(list, s.sizes))} {'/'.join(s.dtypes)}"
                    if disagreement.what != "op" else "")
                 + (f" at {s.site}" if s.site else "") for s in disagreement.sides]
        out.append(ev.Conclusion(
            kind=ev.MISMATCH, communicator=pg.name, ranks=tuple(suspects),
            pids=tuple(live[r] for r in suspects if live and r in live),
            ops=tuple(s.op for s in disagreement.sides), seq=disagreement.seq,
            sites=tuple(s.site or "?" for s in disagreement.sides), source=ev.SOURCE_FR,
            sentence=f"Mismatched collectives in {pg.label} at collective #{disagreement.seq} "
                     f"({disagreement.what} differs): {'; '.join(parts)} (Flight Recorder)."))
    lasts = {r: pg.last(r) for r in pg.entries.keys() | pg.groups.keys()}
    lasts = {r: v for r, v in lasts.items() if v is not None}
    if len(lasts) >= 2 and len(set(lasts.values())) > 1:
        top = max(lasts.values())
        ahead = sorted(r for r, v in lasts.items() if v == top)
        behind = sorted(r for r, v in lasts.items() if v < top)
        lowest = min(lasts[r] for r in behind)
        nxt = pg.entries.get(ahead[0], {}).get(lowest + 1)
        out.append(ev.Conclusion(
            kind=ev.BEHIND, communicator=pg.name, ranks=tuple(behind),
            pids=tuple(live[r] for r in behind if live and r in live),
            ops=(nxt.op,) if nxt else (), seq=lowest + 1, sites=(nxt.site,) if nxt and nxt.site
            else (), source=ev.SOURCE_FR,
            sentence=f"{pg.label.capitalize()}: {rank_names(behind)} enqueued collectives up to "
                     + ", ".join(f"#{lasts[r]}" for r in behind)
                     + f"; {rank_names(ahead)} reached #{top}: {rank_names(behind)} "
                     f"{'has' if len(behind) == 1 else 'have'} not reached collective "
                     f"#{lowest + 1} ({_at(nxt)}) (Flight Recorder)."))
    return out


def from_fr(dumps: Sequence[ev.FrDump], live: Mapping[int, int] | None,
            all_ranks_local: bool = True) -> tuple[list[ev.Communicator], list[ev.Conclusion]]:
    """Process groups, each rank's position, and the conclusions the dumps support.

    ``all_ranks_local``: every rank of the job runs on this node; when False, a member with
    neither a process nor a dump here is on another node, not missing."""
    communicators: list[ev.Communicator] = []
    conclusions: list[ev.Conclusion] = []
    for name, pg in sorted(_groups(dumps).items()):
        members = pg.members
        index = {g: i for i, g in enumerate(members)}
        positions = []
        for rank in sorted(pg.entries.keys() | pg.groups.keys()):
            group = pg.groups.get(rank)
            last = pg.last(rank)
            entry = pg.entries.get(rank, {}).get(last) if last is not None else None
            positions.append(ev.RankPosition(
                rank=index.get(rank, rank), global_rank=rank,
                pid=live.get(rank) if live else None, source=ev.SOURCE_FR,
                last_enqueued=last, last_started=group.last_started if group else None,
                last_completed=group.last_completed if group else None,
                last_op=entry.op if entry else None, last_state=entry.state if entry else None,
                last_site=entry.site if entry else None))
        missing = []
        if live is not None:
            dumped = set(pg.entries) | set(pg.groups)
            for rank in members:
                if rank in live or (not all_ranks_local and rank not in dumped):
                    continue
                reason = ("its process has exited; its dump is from before" if rank in dumped
                          else "no process and no dump")
                missing.append(ev.MissingRank(rank=index[rank], global_rank=rank, reason=reason,
                                              source=ev.SOURCE_FR))
        disagreement = _disagreement(pg)
        communicators.append(ev.Communicator(
            id=name, source=ev.SOURCE_FR, name=pg.desc, size=len(members) or None,
            members=members, positions=tuple(positions), missing=tuple(missing),
            disagreement=disagreement))
        conclusions.extend(_conclusions(pg, live, missing, disagreement))
    return communicators, conclusions
