"""Every rank waits in send or recv and no peer can be read: the pending ops do not match.

An async op (``isend``/``irecv``, ``batch_isend_irecv``) is waited on in ``work.wait()`` from the
user's own code, so no c10d Python frame holds its ``src``/``dst``/``tag``: the op comes from
the native Work object (analyze/evidence/classify.py) and the peer from nowhere. What is still
certain:
when every rank is stuck in a point-to-point op and none is anywhere else, no pending send has
the receive it needs. All receive (or all send): nobody can start. Some of each: a send and the
receive meant for it name different peers or tags (gloo matches on both; NCCL on the peer).
"""

from __future__ import annotations

from hangscope.analyze.evidence.facts import Facts
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.model import Category, Process, Severity, Verdict, VerdictKind, rank_id
from hangscope.words import rank_set


def _p2p_op(facts: Facts, proc: Process) -> str | None:
    thread = proc.working_thread
    if thread is None or facts.categories[proc.key] is not Category.COLLECTIVE:
        return None
    return thread.op if is_p2p(thread.op) else None


def _sites(procs: list[Process]) -> str:
    sites = dict.fromkeys(t.site for p in procs if (t := p.working_thread) and t.site)
    return f" at {', '.join(sites)}" if sites else ""


def p2p_unmatched(facts: Facts) -> Verdict | None:
    """Every rank is stuck in send/recv, none elsewhere, and no cycle or peer could be read."""
    ranks = [p for p in facts.subjects if p.rank is not None]
    if len(ranks) < 2 or any(p.key not in facts.stuck for p in ranks):
        return None
    ops = {p.key: _p2p_op(facts, p) for p in ranks}
    if None in ops.values():
        return None
    senders = [p for p in ranks if ops[p.key] == "send"]
    receivers = [p for p in ranks if ops[p.key] == "recv"]
    if len(senders) + len(receivers) != len(ranks):  # batch_isend_irecv: both at once, unknown
        return None
    is_rank = facts.is_rank

    def names(procs: list[Process]) -> str:
        return rank_set(sorted(rank_id(p) for p in procs), is_rank)

    def wait(procs: list[Process]) -> str:
        return f"{names(procs)} {'wait' if len(procs) > 1 else 'waits'}"

    if not senders or not receivers:
        side = "receive" if receivers else "send"
        summary = (f"Point-to-point deadlock: every rank waits to {side}{_sites(ranks)} and "
                   f"none {'sends' if receivers else 'receives'}, so none can complete.")
        suspects = ranks
    else:
        summary = (f"Unmatched point-to-point ops: {wait(senders)} for a send to be "
                   f"received{_sites(senders)} and {wait(receivers)} to "
                   f"receive{_sites(receivers)}; no rank is anywhere else, so a pending send "
                   "and the receive meant for it name different peers or tags.")
        suspects = list(senders)
        if len(senders) == 1:
            # A pipeline or ring sends to a neighbour: name the pair, the rest waits behind it.
            sent = rank_id(senders[0])
            near = [p for p in receivers if rank_id(p) in (sent + 1, sent - 1)]
            if len(near) == 1:
                suspects.append(near[0])
                rest = [p for p in receivers if p is not near[0]]
                summary += (f" The pair to check is {names(senders)} and its neighbour "
                            f"{names(near)}")
                summary += (f"; {wait(rest)} behind them." if rest else ".")
    summary += (" The calls' src/dst and tag (or the Flight Recorder) show which; an async "
                "op's peer is not in the stacks.")
    pids = tuple(p.pid for p in suspects)
    lines = tuple(f"{names([p])}: waits in {ops[p.key]}{_sites([p])}" for p in ranks)
    return Verdict(VerdictKind.P2P_DEADLOCK, Severity.CRITICAL, summary, pids, lines,
                   suspect_hosts=tuple(p.host for p in suspects))
