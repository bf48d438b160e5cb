"""The Flight Recorder half of analyze/evidence/collectives.py: process groups from per-rank dumps.

Pure: a function of parsed dumps (``evidence.FrDump``), wherever it is called from. Ranks here
are global ranks (a dump is named after its rank's global rank; a group's members are listed
in global ranks).

A group is its name *and* its members (analyze/evidence/flightrec/fr_groups.py gathers them:
``split_group``
gives disjoint groups one name, and each rank sees only its own). Each sequence id is compared
among the ranks that reached it (a rank that lags hides nothing the others disagree on; past a
wrapped ring buffer's first id only, so that every rank's view is there), op by op
(analyze/evidence/flightrec/fr_match.py); p2p ops after them
(analyze/evidence/flightrec/fr_p2p.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from hangscope.analyze.evidence.flightrec import fr_match
from hangscope.analyze.evidence.flightrec.fr_groups import Pg, process_groups, rank_names
from hangscope.analyze.evidence.flightrec.fr_p2p import NOT_POSTED, p2p_disagreement
from hangscope.model import nccl as ev


def _at(entry: ev.FrEntry | None) -> str:
    if entry is None:
        return "?"
    return entry.op + (f" at {entry.site}" if entry.site else "")


def _side(pg: Pg, ranks: list[int], seq: int, index: int, detail: str | None,
          field: str = "") -> ev.Side:
    """One side of a disagreement; ``field`` ("input", "output"): the sizes that differ,
    named in its detail (an all_gather of equal inputs into other outputs is no input
    mismatch)."""
    entries = pg.seqs[ranks[0]][seq]
    e = entries[min(index, len(entries) - 1)]
    if field:
        detail = f"{field} sizes " + str([list(x) for x in (
            e.input_sizes if field == "input" else e.output_sizes)])
    return ev.Side(ranks=tuple(ranks), op=e.op, sizes=e.input_sizes, dtypes=e.input_dtypes,
                   site=e.site, output_sizes=e.output_sizes, state=e.state,
                   record_id=e.record_id, detail=detail)


def _seq_disagreement(pg: Pg, seq: int, ranks: list[int],
                      views: list[list[ev.FrEntry]]) -> ev.Disagreement | None:
    """The ranks that reached ``seq`` (their entries complete; ``views``: each one's entries
    of it, in the same order), split into sides that agree."""
    size = len(pg.members)
    exact_key = fr_match.exact_key
    first = exact_key(views[0])
    entries_of: dict[int, list[ev.FrEntry]] = {ranks[0]: views[0]}  # a group's first rank ->
    exact: dict[tuple, list[int]] = {first: list(ranks)}  # its entries; key -> its ranks
    # Nearly always every rank's entries are alike: compared to the first rank's, not hashed.
    if any(exact_key(view) != first for view in views):
        exact = {}
        for rank, view in zip(ranks, views, strict=True):
            group = exact.get(key := exact_key(view))
            if group is None:
                exact[key] = [rank]
                entries_of[rank] = view
            else:
                group.append(rank)
    sides: list[list[int]] = []
    first: fr_match.Diff | None = None
    for group in exact.values():
        for side in sides:
            diff = fr_match.list_diff(entries_of[side[0]], entries_of[group[0]], size)
            if diff is None:
                side.extend(group)
                break
            first = first or diff
        else:
            sides.append(list(group))
    if len(sides) > 1 and first is not None:
        return ev.Disagreement(seq=seq, what=first.what, sides=tuple(
            _side(pg, sorted(s), seq, first.index, None, first.field) for s in sides))
    if len(sides) == 1:  # every rank agrees: on an entry its op cannot produce, all are wrong
        rep = entries_of[sides[0][0]]
        own = fr_match.list_diff(rep, rep, size)
        if own is not None:
            return ev.Disagreement(seq=seq, what=own.what, sides=(
                _side(pg, sorted(sides[0]), seq, own.index, own.detail),))
    if any(fr_match.is_all_to_all(e.op) for e in views[0]) and set(ranks) == set(pg.members):
        totals = fr_match.all_to_all_totals(views)
        if totals:
            detail = f"{totals[0]} elements sent in all, {totals[1]} received"
            return ev.Disagreement(seq=seq, what="numel", sides=tuple(
                _side(pg, [r], seq, 0, detail) for r in ranks))
    return None


def _state_disagreement(pg: Pg, seq: int, ranks: list[int],
                        views: list[list[ev.FrEntry]]) -> ev.Disagreement | None:
    """Ranks whose entries of ``seq`` are in different states (a rank not started what
    another completed), over the ops every rank has."""
    n = min(map(len, views))
    state = views[0][0].state
    if n == 1 and all(view[0].state == state for view in views):
        return None  # one state on every rank (nearly always): nothing to group
    by_state: dict[tuple, list[int]] = {}
    for rank, view in zip(ranks, views, strict=True):
        key = (view[0].state,) if n == 1 else tuple([e.state for e in view[:n]])
        group = by_state.get(key)
        if group is None:
            by_state[key] = [rank]
        else:
            group.append(rank)
    if len(by_state) > 1 and all(s in fr_match.STATE_ORDER for k in by_state for s in k):
        return ev.Disagreement(seq=seq, what="state", sides=tuple(
            _side(pg, r, seq, 0, None) for r in by_state.values()))
    return None


def _disagreement(pg: Pg) -> ev.Disagreement | None:
    """The first sequence id where the ranks that reached it issued different collectives;
    else the first where they are in different states (a rank not started what another
    completed)."""
    # seq -> (the ranks that reached it, in rank order; each one's entries of it): one pass
    # over every rank's entries, each seq then compared without a lookup per rank.
    by_seq: dict[int, tuple[list[int], list[list[ev.FrEntry]]]] = {}
    # A wrapped ring buffer lost every seq before its first, and the start of that one: only
    # the seqs after it are held by every rank. Below them the ranks that still hold a seq
    # would be compared without the wrapped ones, and split into sides that are not the job's.
    floor = max((min(pg.seqs[r]) + 1 for r in pg.wrapped if pg.seqs.get(r)), default=0)
    for rank in sorted(pg.seqs):
        for seq, view in pg.seqs[rank].items():
            if seq < floor:
                continue
            held = by_seq.get(seq)
            if held is None:
                by_seq[seq] = ([rank], [view])
            else:
                held[0].append(rank)
                held[1].append(view)
    state: ev.Disagreement | None = None
    for seq in sorted(by_seq):
        ranks, views = by_seq[seq]
        if len(ranks) < 2:
            continue
        found = _seq_disagreement(pg, seq, ranks, views)
        if found is not None:
            return found
        if state is None:
            state = _state_disagreement(pg, seq, ranks, views)
    return state or p2p_disagreement(pg)


def _sizes_of(s: ev.Side) -> str:
    sizes = s.output_sizes if s.op in ("scatter", "recv") and not s.sizes else s.sizes
    return str([list(x) for x in sizes])


def _sizes_field(d: ev.Disagreement) -> str:
    """Which sizes the sides of a size disagreement differ in: "input" or "output" ("" for
    one side whose entry contradicts itself)."""
    if len(d.sides) < 2:
        return ""
    if d.sides[0].op != "scatter" and len({s.sizes for s in d.sides}) > 1:
        return "input"
    return "output" if len({s.output_sizes for s in d.sides}) > 1 else ""


def _mismatch_sentence(pg: Pg, d: ev.Disagreement) -> str:
    if d.what == "p2p":
        parts = [f"{rank_names(s.ranks)} {s.op} of {_sizes_of(s)} {'/'.join(s.dtypes)}"
                 + (f" at {s.site}" if s.site else "") for s in d.sides]
        return (f"Point-to-point ops in {pg.label} do not match: {'; '.join(parts)} "
                f"({d.sides[0].detail}) (Flight Recorder).")
    if d.what == "numel":
        return (f"Mismatched all_to_all in {pg.label} at collective #{d.seq}: "
                f"{d.sides[0].detail} (Flight Recorder).")
    field = _sizes_field(d) if d.what == "sizes" else ""
    parts = []
    for s in d.sides:
        shown = (f" of {_sizes_of(s)}" + (f" -> {[list(x) for x in s.output_sizes]}"
                                          if s.output_sizes and (s.output_sizes != s.sizes
                                                                 or field == "output") else "")
                 if d.what in ("sizes", "coalesced") else
                 f" of {'/'.join(s.dtypes) or '?'}" if d.what == "dtype" else "")
        parts.append(f"{rank_names(s.ranks)} called {s.op}{shown}"
                     + (f" at {s.site}" if s.site else ""))
    what = ("the coalesced group differs" if d.what == "coalesced" else
            f"{field} sizes differ" if field else f"{d.what} differs")
    return (f"Mismatched collectives in {pg.label} at collective #{d.seq} ({what}): "
            f"{'; '.join(parts)} (Flight Recorder).")


def _conclusions(pg: Pg, live: Mapping[int, int] | None,
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
    elif d is not None and d.what == "p2p" and d.sides[-1].detail == NOT_POSTED:
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
    lasts = {r: pg.reached(r) for r in pg.ranks if r in pg.members or not pg.members}
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
            sentence=f"{pg.label.capitalize()}: {rank_names(behind)} enqueued "
                     + ("no collective in it" if not any(lasts[r] for r in behind) else
                        "collectives up to " + ", ".join(f"#{lasts[r]}" for r in behind))
                     + f"; {rank_names(ahead)} reached #{top}: {rank_names(behind)} "
                     f"{'has' if len(behind) == 1 else 'have'} not reached collective "
                     f"#{lowest + 1} ({_at(nxt)}) (Flight Recorder)."))
    return out


def _missing(pg: Pg, live: Mapping[int, int] | None, all_ranks_local: bool,
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
    for pg in process_groups(dumps):
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
