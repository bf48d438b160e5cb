"""Point-to-point ops of one process group: each send matched to its receive, and the ops
nobody can end.

Pure, a step of analyze/evidence/flightrec/collectives_fr.py. The k-th ``send a->b`` is matched
to the k-th ``recv b<-a`` (sizes, dtypes) between ranks whose buffers still hold their first
op. A send with no receive posted (or the reverse) names its peer as not having posted its
half (behind), unless that peer itself waits in an unmatched p2p op, and so on round a circle
(two ranks that both receive from each other): then it is a mismatch of every rank in the
circle, and nobody is behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hangscope.analyze.evidence.flightrec.fr_groups import Pg
from hangscope.model import nccl as ev

NOT_POSTED = "not posted"  # Side.detail of the peer that has not posted its half of a p2p op


def _global(pg: Pg, group_rank: int) -> int | None:
    return pg.members[group_rank] if 0 <= group_rank < len(pg.members) else None


def p2p_disagreement(pg: Pg) -> ev.Disagreement | None:
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
    held = set(pg.ranks)
    compared = [(pair, ops) for pair, ops in sorted(pairs.items())
                if not ({*pair} & pg.wrapped) and {*pair} <= held]
    waits = _unmatched(compared)
    for (src, dst), (sends, recvs) in compared:
        for k, (s, r) in enumerate(zip(sends, recvs, strict=False)):
            if s.input_sizes != r.output_sizes or (s.input_dtypes and r.output_dtypes and
                                                   s.input_dtypes != r.output_dtypes):
                return _p2p_sides(pg, "p2p", s, r, src, dst, f"send #{k + 1}")
        if len(sends) != len(recvs):
            k = min(len(sends), len(recvs))
            lone = (sends if len(sends) > len(recvs) else recvs)[k]
            if lone.state != "completed":
                cycle = _wait_cycle(waits, src if lone.op == "send" else dst)
                if cycle:
                    return _p2p_cycle(cycle)
                d = _p2p_sides(pg, "p2p", lone, None, src, dst,
                               f"{lone.op} #{k + 1} has no matching "
                               f"{'recv' if lone.op == 'send' else 'send'} posted")
                peer = dst if lone.op == "send" else src
                return ev.Disagreement(seq=d.seq, what=d.what, sides=(*d.sides, ev.Side(
                    ranks=(peer,), op="recv" if lone.op == "send" else "send",
                    detail=NOT_POSTED)))
    return None


_Wait = tuple[ev.FrEntry, int, int]  # an unmatched p2p op, the rank in it, the peer it needs


def _unmatched(compared: Sequence[tuple[tuple[int, int], tuple[list[ev.FrEntry],
                                                                list[ev.FrEntry]]]],
               ) -> dict[int, _Wait]:
    """Rank -> the first p2p op it waits in that its peer has no counterpart for (a send
    with no receive posted, a receive with no send), with the peer that would have to post."""
    out: dict[int, _Wait] = {}
    for (src, dst), (sends, recvs) in compared:
        if len(sends) == len(recvs):
            continue
        lone = (sends if len(sends) > len(recvs) else recvs)[min(len(sends), len(recvs))]
        if lone.state == "completed":
            continue
        rank, peer = (src, dst) if lone.op == "send" else (dst, src)
        if rank not in out or (lone.record_id or 0) < (out[rank][0].record_id or 0):
            out[rank] = (lone, rank, peer)
    return out


def _wait_cycle(waits: Mapping[int, _Wait], start: int) -> list[_Wait]:
    """The unmatched p2p ops that wait on each other in a circle, from ``start`` on (two
    ranks that both receive from each other: neither sends); [] where the chain ends at a
    rank that waits in no unmatched p2p op (that rank has not posted its half: behind)."""
    path: list[int] = []
    rank: int | None = start
    while rank is not None and rank in waits and rank not in path:
        path.append(rank)
        rank = waits[rank][2]
    if rank is None or rank not in path:
        return []
    return [waits[r] for r in path[path.index(rank):]]


def _p2p_cycle(cycle: Sequence[_Wait]) -> ev.Disagreement:
    """Point-to-point ops that wait on each other: each rank's op needs a peer that waits in
    an unmatched op of its own, so nobody posts what would end a wait."""
    ops = {e.op for e, _, _ in cycle}
    who = "both" if len(cycle) == 2 else "each"
    detail = (f"{who} wait{'s' if who == 'each' else ''} to receive, nobody sends"
              if ops == {"recv"} else
              f"{who} wait{'s' if who == 'each' else ''} to send, nobody receives"
              if ops == {"send"} else "each waits for a peer that waits in another unmatched op")
    return ev.Disagreement(seq=cycle[0][0].seq, what="p2p", sides=tuple(
        _side(e, rank, detail) for e, rank, _ in sorted(cycle, key=lambda w: w[1])))


def _side(e: ev.FrEntry, rank: int, detail: str) -> ev.Side:
    return ev.Side(ranks=(rank,), op=e.op, sizes=e.input_sizes or e.output_sizes,
                   dtypes=e.input_dtypes or e.output_dtypes, site=e.site, state=e.state,
                   output_sizes=e.output_sizes, record_id=e.record_id, detail=detail)


def _p2p_sides(pg: Pg, what: str, a: ev.FrEntry, b: ev.FrEntry | None, src: int, dst: int,
               detail: str) -> ev.Disagreement:
    sides = [_side(a, src if a.op == "send" else dst, detail)]
    if b is not None:
        sides.append(_side(b, dst if b.op == "recv" else src, detail))
    return ev.Disagreement(seq=a.seq, what=what, sides=tuple(sides))
