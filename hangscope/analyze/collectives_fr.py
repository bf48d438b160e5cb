"""The Flight Recorder half of analyze/collectives.py: process groups from per-rank dumps.

Pure: a function of parsed dumps (``evidence.FrDump``), wherever it is called from. Ranks here
are global ranks (a dump is named after its rank's global rank; a group's members are listed
in global ranks).

A group is its name *and* its members: ``split_group`` gives disjoint groups one name, and
each rank sees only its own. Where a dump lists no members (gloo registers one unnamed config,
``''``), the members are the ranks whose dumps hold the group. Each sequence id is compared
among the ranks that reached it (a rank that lags, or whose ring buffer wrapped, hides nothing
the others disagree on), op by op (analyze/fr_match.py); p2p sends are matched to receives.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from hangscope.analyze import fr_match
from hangscope.model import nccl as ev


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


@dataclass
class _Pg:
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


def _groups(dumps: Sequence[ev.FrDump]) -> list[_Pg]:
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

    pgs: dict[tuple[str, tuple[int, ...] | None], _Pg] = {}
    for dump in dumps:
        own: dict[str, tuple[str, tuple[int, ...] | None]] = {}
        for g in dump.groups:
            k = own[g.name] = key(dump.rank, g.name, g.ranks)
            pg = pgs.setdefault(k, _Pg(g.name, k[1] or ()))
            pg.groups[dump.rank] = g
            pg.desc = pg.desc or g.desc
        records = [e.record_id for e in dump.entries if e.record_id is not None]
        wrapped = bool(records) and min(records) > 0
        for entry in dump.entries:
            k = own.get(entry.pg) or own.setdefault(entry.pg, key(dump.rank, entry.pg, ()))
            pg = pgs.setdefault(k, _Pg(entry.pg, k[1] or ()))
            if wrapped:
                pg.wrapped.add(dump.rank)
            if entry.p2p:
                pg.p2p.setdefault(dump.rank, []).append(entry)
            else:
                pg.seqs.setdefault(dump.rank, {}).setdefault(entry.seq, []).append(entry)
    for (_, listed), pg in pgs.items():
        if listed is None:  # gloo: no member list anywhere; the ranks that hold the group
            pg.members = tuple(pg.ranks)
    names: dict[str, int] = {}
    for pg in pgs.values():
        names[pg.name] = names.get(pg.name, 0) + 1
    for pg in pgs.values():
        pg.label_members = names[pg.name] > 1
    return sorted(pgs.values(), key=lambda p: (p.name, p.members))


def _side(pg: _Pg, ranks: list[int], seq: int, index: int, detail: str | None) -> ev.Side:
    entries = pg.seqs[ranks[0]][seq]
    e = entries[min(index, len(entries) - 1)]
    return ev.Side(ranks=tuple(ranks), op=e.op, sizes=e.input_sizes, dtypes=e.input_dtypes,
                   site=e.site, output_sizes=e.output_sizes, state=e.state,
                   record_id=e.record_id, detail=detail)


def _seq_disagreement(pg: _Pg, seq: int, ranks: list[int]) -> ev.Disagreement | None:
    """The ranks that reached ``seq`` (their entries complete), split into sides that agree."""
    size = len(pg.members)
    exact: dict[tuple, list[int]] = {}
    for rank in ranks:
        exact.setdefault(fr_match.exact_key(pg.seqs[rank][seq]), []).append(rank)
    sides: list[list[int]] = []
    first: fr_match.Diff | None = None
    for group in exact.values():
        for side in sides:
            diff = fr_match.list_diff(pg.seqs[side[0]][seq], pg.seqs[group[0]][seq], size)
            if diff is None:
                side.extend(group)
                break
            first = first or diff
        else:
            sides.append(list(group))
    if len(sides) > 1 and first is not None:
        return ev.Disagreement(seq=seq, what=first.what, sides=tuple(
            _side(pg, sorted(s), seq, first.index, None) for s in sides))
    if len(sides) == 1:  # every rank agrees: on an entry its op cannot produce, all are wrong
        rep = pg.seqs[sides[0][0]][seq]
        own = fr_match.list_diff(rep, rep, size)
        if own is not None:
            return ev.Disagreement(seq=seq, what=own.what, sides=(
                _side(pg, sorted(sides[0]), seq, own.index, own.detail),))
    views = [pg.seqs[r][seq] for r in ranks]
    if set(ranks) == set(pg.members) and any(fr_match.is_all_to_all(e.op) for e in views[0]):
        totals = fr_match.all_to_all_totals(views)
        if totals:
            detail = f"{totals[0]} elements sent in all, {totals[1]} received"
            return ev.Disagreement(seq=seq, what="numel", sides=tuple(
                _side(pg, [r], seq, 0, detail) for r in ranks))
    return None


def _complete(pg: _Pg, rank: int, seq: int) -> bool:
    """The rank's entries of ``seq`` are all there: not the first seq of a wrapped buffer."""
    return not (rank in pg.wrapped and seq == min(pg.seqs[rank]))


def _disagreement(pg: _Pg) -> ev.Disagreement | None:
    """The first sequence id where the ranks that reached it issued different collectives;
    else the first where they are in different states (a rank not started what another
    completed)."""
    by_seq: dict[int, list[int]] = {}
    for rank in sorted(pg.seqs):
        for seq in pg.seqs[rank]:
            if _complete(pg, rank, seq):
                by_seq.setdefault(seq, []).append(rank)
    state: ev.Disagreement | None = None
    for seq in sorted(by_seq):
        ranks = by_seq[seq]
        if len(ranks) < 2:
            continue
        found = _seq_disagreement(pg, seq, ranks)
        if found is not None:
            return found
        if state is None:
            by_state: dict[tuple, list[int]] = {}
            n = min(len(pg.seqs[r][seq]) for r in ranks)  # the ops every rank has
            for rank in ranks:
                by_state.setdefault(tuple(e.state for e in pg.seqs[rank][seq][:n]),
                                    []).append(rank)
            if len(by_state) > 1 and all(s in fr_match.STATE_ORDER for k in by_state for s in k):
                state = ev.Disagreement(seq=seq, what="state", sides=tuple(
                    _side(pg, r, seq, 0, None) for r in by_state.values()))
    return state or _p2p_disagreement(pg)


_NOT_POSTED = "not posted"  # Side.detail of the peer that has not posted its half of a p2p op


def _global(pg: _Pg, group_rank: int) -> int | None:
    return pg.members[group_rank] if 0 <= group_rank < len(pg.members) else None


def _p2p_disagreement(pg: _Pg) -> ev.Disagreement | None:
    """The first send whose receive differs in size or dtype, or that has no receive posted
    (only between ranks whose buffers still hold their first p2p op: counts must align)."""
    pairs: dict[tuple[int, int], tuple[list[ev.FrEntry], list[ev.FrEntry]]] = {}
    for rank, ops in pg.p2p.items():
        if rank in pg.wrapped:
            continue
        for e in ops:
            if e.peer is None:
                continue
            src, dst = (_global(pg, e.peer[0]), _global(pg, e.peer[1]))
            if src is None or dst is None or (src if e.op == "send" else dst) != rank:
                continue
            pairs.setdefault((src, dst), ([], []))[0 if e.op == "send" else 1].append(e)
    for (src, dst), (sends, recvs) in sorted(pairs.items()):
        held = set(pg.ranks)
        if src in pg.wrapped or dst in pg.wrapped or src not in held or dst not in held:
            continue
        for k, (s, r) in enumerate(zip(sends, recvs, strict=False)):
            if s.input_sizes != r.output_sizes or (s.input_dtypes and r.output_dtypes and
                                                   s.input_dtypes != r.output_dtypes):
                return _p2p_sides(pg, "p2p", s, r, src, dst, f"send #{k + 1}")
        if len(sends) != len(recvs):
            k = min(len(sends), len(recvs))
            lone = (sends if len(sends) > len(recvs) else recvs)[k]
            if lone.state != "completed":
                d = _p2p_sides(pg, "p2p", lone, None, src, dst,
                               f"{lone.op} #{k + 1} has no matching "
                               f"{'recv' if lone.op == 'send' else 'send'} posted")
                peer = dst if lone.op == "send" else src
                return ev.Disagreement(seq=d.seq, what=d.what, sides=(*d.sides, ev.Side(
                    ranks=(peer,), op="recv" if lone.op == "send" else "send",
                    detail=_NOT_POSTED)))
    return None


def _p2p_sides(pg: _Pg, what: str, a: ev.FrEntry, b: ev.FrEntry | None, src: int, dst: int,
               detail: str) -> ev.Disagreement:
    def side(e: ev.FrEntry, rank: int) -> ev.Side:
        return ev.Side(ranks=(rank,), op=e.op, sizes=e.input_sizes or e.output_sizes,
                       dtypes=e.input_dtypes or e.output_dtypes, site=e.site, state=e.state,
                       output_sizes=e.output_sizes, record_id=e.record_id, detail=detail)
    sides = [side(a, src if a.op == "send" else dst)]
    if b is not None:
        sides.append(side(b, dst if b.op == "recv" else src))
    return ev.Disagreement(seq=a.seq, what=what, sides=tuple(sides))


def _sizes_of(s: ev.Side) -> str:
    sizes = s.output_sizes if s.op in ("scatter", "recv") and not s.sizes else s.sizes
    return str([list(x) for x in sizes])


def _mismatch_sentence(pg: _Pg, d: ev.Disagreement) -> str:
    if d.what == "p2p":
        parts = [f"{rank_names(s.ranks)} {s.op} of {_sizes_of(s)} {'/'.join(s.dtypes)}"
                 + (f" at {s.site}" if s.site else "") for s in d.sides]
        return (f"Point-to-point ops in {pg.label} do not match: {'; '.join(parts)} "
                f"({d.sides[0].detail}) (Flight Recorder).")
    if d.what == "numel":
        return (f"Mismatched all_to_all in {pg.label} at collective #{d.seq}: "
                f"{d.sides[0].detail} (Flight Recorder).")
    parts = []
    for s in d.sides:
        shown = (f" of {_sizes_of(s)}" + (f" -> {[list(x) for x in s.output_sizes]}"
                                          if s.output_sizes and s.output_sizes != s.sizes else "")
                 if d.what in ("sizes", "coalesced") else
                 f" of {'/'.join(s.dtypes) or '?'}" if d.what == "dtype" else "")
        parts.append(f"{rank_names(s.ranks)} called {s.op}{shown}"
                     + (f" at {s.site}" if s.site else ""))
    what = "the coalesced group differs" if d.what == "coalesced" else f"{d.what} differs"
    return (f"Mismatched collectives in {pg.label} at collective #{d.seq} ({what}): "
            f"{'; '.join(parts)} (Flight Recorder).")


def _conclusions(pg: _Pg, live: Mapping[int, int] | None,
                 missing: Sequence[ev.MissingRank],
                 disagreement: ev.Disagreement | None) -> list[ev.Conclusion]:
    out: list[ev.Conclusion] = []

    def pids(ranks: Sequence[int]) -> tuple[int, ...]:
        return tuple(live[r] for r in ranks if live and r in live)

    if missing:
        ranks = [m.global_rank for m in missing if m.global_rank is not None]
        out.append(ev.Conclusion(
            kind=ev.MISSING, communicator=pg.id, ranks=tuple(ranks), source=ev.SOURCE_FR,
            sentence=f"{rank_names(ranks).capitalize()} of {pg.label} "
                     f"{'has' if len(ranks) == 1 else 'have'} no live process ("
                     + "; ".join(f"rank {m.global_rank}: {m.reason}" for m in missing)
                     + ") (Flight Recorder group members)."))
    d = disagreement
    if d is not None and d.what == "state":
        low = min(fr_match.STATE_ORDER[s.state or "scheduled"] for s in d.sides)
        lag = sorted(r for s in d.sides if fr_match.STATE_ORDER[s.state or "scheduled"] == low
                     for r in s.ranks)
        top = max(d.sides, key=lambda s: fr_match.STATE_ORDER[s.state or "scheduled"])
        lo = next(s for s in d.sides if fr_match.STATE_ORDER[s.state or "scheduled"] == low)
        out.append(ev.Conclusion(
            kind=ev.BEHIND, communicator=pg.id, ranks=tuple(lag), pids=pids(lag),
            ops=(top.op,), seq=d.seq, sites=(top.site,) if top.site else (),
            source=ev.SOURCE_FR,
            sentence=f"{pg.label.capitalize()}: collective #{d.seq} ({top.op}) is "
                     f"{top.state} on {rank_names(top.ranks)} but only {lo.state} on "
                     f"{rank_names(lag)} (Flight Recorder entry states)."))
    elif d is not None and d.what == "p2p" and d.sides[-1].detail == _NOT_POSTED:
        s, peer = d.sides[0], d.sides[-1]
        out.append(ev.Conclusion(
            kind=ev.BEHIND, communicator=pg.id, ranks=peer.ranks, pids=pids(peer.ranks),
            ops=(peer.op,), seq=d.seq, sites=(s.site,) if s.site else (), source=ev.SOURCE_FR,
            sentence=f"{pg.label.capitalize()}: {rank_names(s.ranks)}'s {s.detail}"
                     + (f" at {s.site}" if s.site else "") + f": {rank_names(peer.ranks)} "
                     f"has not posted its {peer.op} (Flight Recorder)."))
    elif d is not None:
        smallest = min(len(s.ranks) for s in d.sides)
        suspects = [r for s in d.sides if len(s.ranks) == smallest for r in s.ranks]
        out.append(ev.Conclusion(
            kind=ev.MISMATCH, communicator=pg.id, ranks=tuple(suspects), pids=pids(suspects),
            ops=tuple(s.op for s in d.sides), seq=d.seq,
            sites=tuple(s.site or "?" for s in d.sides), source=ev.SOURCE_FR,
            sentence=_mismatch_sentence(pg, d)))
    lasts = {r: pg.last(r) for r in pg.ranks if r in pg.members or not pg.members}
    lasts = {r: v for r, v in lasts.items() if v is not None}
    if len(lasts) >= 2 and len(set(lasts.values())) > 1:
        top = max(lasts.values())
        ahead = sorted(r for r, v in lasts.items() if v == top)
        behind = sorted(r for r, v in lasts.items() if v < top)
        lowest = min(lasts[r] for r in behind)
        nxt = next((es[0] for r in ahead for es in [pg.seqs.get(r, {}).get(lowest + 1)] if es),
                   None)
        out.append(ev.Conclusion(
            kind=ev.BEHIND, communicator=pg.id, ranks=tuple(behind), pids=pids(behind),
            ops=(nxt.op,) if nxt else (), seq=lowest + 1, sites=(nxt.site,) if nxt and nxt.site
            else (), source=ev.SOURCE_FR,
            sentence=f"{pg.label.capitalize()}: {rank_names(behind)} enqueued collectives up to "
                     + ", ".join(f"#{lasts[r]}" for r in behind)
                     + f"; {rank_names(ahead)} reached #{top}: {rank_names(behind)} "
                     f"{'has' if len(behind) == 1 else 'have'} not reached collective "
                     f"#{lowest + 1} ({_at(nxt)}) (Flight Recorder)."))
    return out


def _missing(pg: _Pg, live: Mapping[int, int] | None, all_ranks_local: bool,
             fresh: Collection[int], unplaced: int) -> list[ev.MissingRank]:
    """Members with no live process. A rank whose dump was written during this read is alive;
    where some live processes of the job have no rank number, a member without one may be any
    of them, so nobody is called missing for want of a process."""
    if live is None:
        return []
    index = {g: i for i, g in enumerate(pg.members)}
    dumped = set(pg.ranks)
    gone = [r for r in pg.members if r not in live and r not in fresh
            and (all_ranks_local or r in dumped)]
    if len(gone) <= unplaced:
        return []
    return [ev.MissingRank(rank=index[r], global_rank=r, source=ev.SOURCE_FR,
                           reason="no live process of the job is this rank; its dump was "
                           "written before" if r in dumped else "no process and no dump")
            for r in gone]


def from_fr(dumps: Sequence[ev.FrDump], live: Mapping[int, int] | None,
            all_ranks_local: bool = True, fresh: Collection[int] = (),
            unplaced: int = 0) -> tuple[list[ev.Communicator], list[ev.Conclusion]]:
    """Process groups, each rank's position, and the conclusions the dumps support.

    ``live``: global rank -> PID of each live rank process (None: unknown, nobody missing).
    ``all_ranks_local``: every rank of the job runs on this node; when False, a member with
    neither a process nor a dump here is on another node, not missing. ``fresh``: ranks whose
    dump was written during this read. ``unplaced``: live processes of the job that may be
    ranks but have no rank number."""
    communicators: list[ev.Communicator] = []
    conclusions: list[ev.Conclusion] = []
    for pg in _groups(dumps):
        index = {g: i for i, g in enumerate(pg.members)}
        positions = []
        for rank in pg.ranks:
            group = pg.groups.get(rank)
            last = pg.last(rank)
            entries = pg.seqs.get(rank, {}).get(last) if last is not None else None
            entry = entries[-1] if entries else None
            positions.append(ev.RankPosition(
                rank=index.get(rank, rank), global_rank=rank,
                pid=live.get(rank) if live else None, source=ev.SOURCE_FR,
                last_enqueued=last, last_started=group.last_started if group else None,
                last_completed=group.last_completed if group else None,
                last_op=entry.op if entry else None, last_state=entry.state if entry else None,
                last_site=entry.site if entry else None))
        missing = _missing(pg, live, all_ranks_local, fresh, unplaced)
        disagreement = _disagreement(pg)
        communicators.append(ev.Communicator(
            id=pg.id, source=ev.SOURCE_FR, name=pg.desc, size=len(pg.members) or None,
            members=pg.members, positions=tuple(positions), missing=tuple(missing),
            disagreement=disagreement))
        conclusions.extend(_conclusions(pg, live, missing, disagreement))
    return communicators, conclusions
