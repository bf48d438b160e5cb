"""Collective evidence (NCCL RAS, Flight Recorder) -> per-communicator positions and conclusions.

Pure. Per communicator / process group: where each rank is (RAS op counts; FR last enqueued /
started / completed sequence id and op). From that: ranks *behind* (and the op they have not
reached), ranks *missing*, and the first sequence id where ranks issued different collectives
(*mismatch*), with each side's call site where the Flight Recorder has it. RAS alone is enough
for behind and missing (and for a mismatch where the ranks' op counts cross); FR adds op names
at a sequence and call sites. Suspects are only ever ranks named by NCCL or by a dump, mapped to
PIDs through ``live`` (global rank -> PID of a *rank* process): helpers are never suspects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hangscope.analyze.evidence.flightrec.collectives_fr import from_fr, rank_names
from hangscope.gcpause import collector_paused
from hangscope.model import Process, Role
from hangscope.model import nccl as ev

_STATUS_WORD = {ev.DISABLED: "RAS is off (NCCL_RAS_ENABLE=0)",
                ev.TOO_OLD: "NCCL is older than 2.24 (no RAS)",
                ev.NO_NCCL: "the job uses no NCCL (gloo/CPU: the host stacks show its collectives)",
                ev.NO_LISTENER: "no NCCL RAS listener of the job",
                ev.NOT_THIS_JOB: "the RAS port belongs to another job",
                ev.NAMESPACE: "RAS is in a network namespace hangscope could not enter",
                ev.REFUSED: "RAS refused the connection", ev.TIMEOUT: "RAS did not answer in time",
                ev.GARBAGE: "RAS answered something unreadable"}

LAUNCH_VARS = ("TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/frpipe_ "
               "TORCH_FR_DUMP_TEMP_FILE=/tmp/nccl_trace_rank_ TORCH_FR_BUFFER_SIZE=2000")


def _ras_status(r: ev.RasRank) -> str:
    if r.abort:
        return "abort"
    if r.finalize:
        return "finalize"
    if r.init_state not in (None, 0, 7) or r.async_error not in (None, 0, 7):
        return "error"  # 7 = ncclInProgress
    return "init" if r.init_state == 7 else "running"


def _infer_majority(comm: ev.RasComm) -> list[ev.RasRank]:
    """Text form: name the unnamed majority when the communicator's size makes it certain."""
    ranks = list(comm.ranks)
    if comm.size is None or not comm.majorities:
        return ranks
    for op, groups in comm.majorities.items():
        # every rank printed with a count for this op; the rest share the one unnamed group
        counted = {r.rank for r in ranks if op in r.counts}
        rest = [r for r in range(comm.size) if r not in counted and r not in
                {m.rank for m in comm.missing}]
        unnamed_groups = [(v, n) for v, n in groups if n == len(rest)]
        if len(unnamed_groups) == 1 and rest:
            value = unnamed_groups[0][0]
            by_rank = {r.rank: r for r in ranks}
            for rank in rest:
                old = by_rank.get(rank, ev.RasRank(rank=rank))
                by_rank[rank] = ev.RasRank(**{**old.__dict__, "counts": {**old.counts, op: value}})
            ranks = [by_rank[k] for k in sorted(by_rank)]
    return ranks


def _from_ras(comm: ev.RasComm,
              pid_rank: Mapping[int, int]) -> tuple[ev.Communicator, list[ev.Conclusion]]:
    ranks = _infer_majority(comm)
    positions = tuple(ev.RankPosition(
        rank=r.rank, global_rank=pid_rank.get(r.pid) if r.pid else None, pid=r.pid, host=r.host,
        gpu=r.cuda_dev, counts=dict(r.counts), status=_ras_status(r)) for r in ranks)
    missing = []
    for m in comm.missing:
        reason = ("considered dead by RAS" if m.dead
                  else "no answer from its process (exited or hung hard)"
                  if m.unresponsive is not False else "not part of the communicator any more")
        missing.append(ev.MissingRank(rank=m.rank, global_rank=pid_rank.get(m.pid or -1),
                                      pid=m.pid, host=m.host, gpu=m.cuda_dev, reason=reason))
    communicator = ev.Communicator(
        id=comm.hash, source=ev.SOURCE_RAS, size=comm.size, positions=positions,
        missing=tuple(missing), status=comm.status, errors=comm.errors,
        members=tuple(sorted(g for g in (p.global_rank for p in positions) if g is not None)))
    out: list[ev.Conclusion] = []
    if missing:
        known = all(m.global_rank is not None for m in missing)
        who = [m.global_rank if known else m.rank for m in missing]
        details = "; ".join(
            f"rank {m.rank}" + (f" (PID {m.pid}" if m.pid else " (") +
            (f", GPU {m.gpu}" if m.gpu is not None else "") +
            (f" on {m.host}" if m.host else "") + f"): {m.reason}" for m in missing)
        answered = comm.size - len(missing) if comm.size else len(ranks)
        out.append(ev.Conclusion(
            kind=ev.MISSING, communicator=comm.hash, ranks=tuple(who),  # type: ignore[arg-type]
            pids=tuple(m.pid for m in missing if m.pid), global_ranks=known,
            sentence=f"NCCL RAS has no data from communicator rank"
                     f"{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(str(m.rank) for m in missing)} of communicator {comm.hash} "
                     f"({answered} of {comm.size or '?'} ranks answered): {details}."))
    out.extend(_compare_counts(comm.hash, positions))
    return communicator, out


def _label(p: ev.RankPosition) -> tuple[int, bool]:
    return (p.global_rank, True) if p.global_rank is not None else (p.rank, False)


def _compare_counts(comm_id: str, positions: Sequence[ev.RankPosition]) -> list[ev.Conclusion]:
    """Behind (one rank's counts never exceed another's) or mismatch (counts cross)."""
    counted = [p for p in positions if p.counts]
    ops = sorted(set.intersection(*(set(p.counts) for p in counted))) if counted else []
    if len(counted) < 2 or not ops:
        return []
    vectors = {p.rank: tuple(p.counts[op] for op in ops) for p in counted}
    if len(set(vectors.values())) == 1:
        return []
    top = tuple(max(v[i] for v in vectors.values()) for i in range(len(ops)))
    ordered = all(all(a <= b for a, b in zip(v, w, strict=True)) or
                  all(b <= a for a, b in zip(v, w, strict=True))
                  for v in vectors.values() for w in vectors.values())
    glob = all(_label(p)[1] for p in counted)
    name = {p.rank: _label(p)[0] if glob else p.rank for p in counted}
    if ordered:
        behind = [p for p in counted if vectors[p.rank] != top]
        ahead = [p for p in counted if vectors[p.rank] == top]
        lag_ops = sorted({op for p in behind for i, op in enumerate(ops)
                          if vectors[p.rank][i] < top[i]})
        parts = [f"{rank_names([name[p.rank]], glob)} has launched "
                 + ", ".join(f"{op} up to #{p.counts[op]}" for op in lag_ops) for p in behind]
        lead = ", ".join(f"{op} #{top[ops.index(op)]}" for op in lag_ops)
        return [ev.Conclusion(
            kind=ev.BEHIND, communicator=comm_id, ranks=tuple(name[p.rank] for p in behind),
            pids=tuple(p.pid for p in behind if p.pid), ops=tuple(lag_ops), global_ranks=glob,
            sentence=f"Communicator {comm_id}: {'; '.join(parts)}, while "
                     f"{rank_names([name[p.rank] for p in ahead], glob)} launched {lead}: "
                     f"{rank_names([name[p.rank] for p in behind], glob)} "
                     f"{'has' if len(behind) == 1 else 'have'} not reached it (NCCL RAS).")]
    sides: dict[tuple[int, ...], list[ev.RankPosition]] = {}
    for p in counted:
        sides.setdefault(vectors[p.rank], []).append(p)
    low = tuple(min(v[i] for v in vectors.values()) for i in range(len(ops)))
    described, side_ops = [], []
    for vector, members in sides.items():
        extra = [f"{op} #{vector[i]}" for i, op in enumerate(ops) if vector[i] > low[i]]
        side_ops.append("/".join(op for i, op in enumerate(ops) if vector[i] > low[i]) or "-")
        described.append(f"{rank_names([name[p.rank] for p in members], glob)} launched "
                         + (", ".join(extra) or "nothing more"))
    smallest = min(len(m) for m in sides.values())
    suspects = [p for m in sides.values() if len(m) == smallest for p in m]
    return [ev.Conclusion(
        kind=ev.MISMATCH, communicator=comm_id, ranks=tuple(name[p.rank] for p in suspects),
        pids=tuple(p.pid for p in suspects if p.pid), ops=tuple(side_ops), global_ranks=glob,
        sentence=f"Communicator {comm_id}: the ranks launched different collectives: "
                 f"{'; '.join(described)} (NCCL RAS op counts cross).")]


def live_ranks(processes: Sequence[Process]) -> dict[int, int]:
    """Global rank -> PID of every live rank process (helpers have no rank: never suspects)."""
    out: dict[int, int] = {}
    for proc in processes:
        if proc.role not in (Role.RANK, Role.ENGINE_CORE) or proc.rank is None:
            continue
        if proc.is_exited or proc.rank.global_rank is None:
            continue
        out.setdefault(proc.rank.global_rank, proc.pid)
    if not out:  # a job without ranks: its one main process is rank 0 of a world of one
        mains = [p for p in processes if p.role is Role.MAIN and not p.is_exited]
        if len(mains) == 1:
            out[0] = mains[0].pid
    return out


def all_ranks_local(processes: Sequence[Process]) -> bool:
    """Whether every rank of the job runs on this node: no rank's environment says the world
    is larger than its node (torchrun's WORLD_SIZE > LOCAL_WORLD_SIZE, a Slurm node list of
    several nodes)."""
    ranks = [p for p in processes if p.role in (Role.RANK, Role.ENGINE_CORE)]
    for proc in ranks:
        env = proc.environ
        world, local = env.get("WORLD_SIZE", ""), env.get("LOCAL_WORLD_SIZE", "")
        if world.isdigit() and local.isdigit() and int(world) > int(local):
            return False
        nodes = env.get("SLURM_JOB_NODELIST", "")
        if "," in nodes or "[" in nodes:  # node[1-2], a,b: more than one node
            return False
    return True


def unplaced(processes: Sequence[Process]) -> int:
    """Live Python processes of the job that may be ranks but carry no rank number (a
    ``multiprocessing`` child the evidence did not place): a group member with no known
    process may be one of them."""
    return sum(1 for p in processes if p.role in (Role.RANK, Role.ENGINE_CORE, Role.OTHER)
               and (p.rank is None or p.rank.global_rank is None) and not p.is_exited
               and p.python is not False)


def node_evidence(ras: ev.RasReading | None, fr: ev.FrReading | None,
                  processes: Sequence[Process], host: str | None) -> ev.CollectiveEvidence:
    """:func:`analyze` for one node's snapshot: live ranks and locality from its processes."""
    return analyze(ras, fr, live_ranks(processes), host, all_ranks_local(processes),
                   unplaced(processes))


def analyze(ras: ev.RasReading | None, fr: ev.FrReading | None,
            live: Mapping[int, int] | None = None, host: str | None = None,
            all_ranks_local: bool = True, unplaced: int = 0) -> ev.CollectiveEvidence:
    """All collective evidence of one node: communicators, conclusions (missing, mismatch,
    behind, in that order), notes. ``live``: global rank -> PID of each live rank process
    (None: unknown, then no rank is called missing for want of a process).
    ``all_ranks_local``: False for one node of a multi-node job (a group member with neither a
    process nor a dump here is on another node, not missing). ``unplaced``: live processes
    that may be ranks but have no rank number (:func:`unplaced`)."""
    with collector_paused():  # tens of thousands of entries compared, no cycle made
        return _analyze(ras, fr, live, host, all_ranks_local, unplaced)


def _analyze(ras: ev.RasReading | None, fr: ev.FrReading | None,
             live: Mapping[int, int] | None, host: str | None, all_ranks_local: bool,
             unplaced: int) -> ev.CollectiveEvidence:
    pid_rank = {pid: rank for rank, pid in (live or {}).items()}
    communicators: list[ev.Communicator] = []
    conclusions: list[ev.Conclusion] = []
    notes: list[str] = []
    if ras is not None:
        notes.append(ras.note)
        for comm in ras.report.communicators if ras.report else ():
            c, found = _from_ras(comm, pid_rank)
            communicators.append(c)
            conclusions.extend(found)
    if fr is not None:
        notes.append(fr.note)
        notes.extend(fr.notes)
        if fr.dumps:
            c_fr, found_fr = from_fr(fr.dumps, live, all_ranks_local, fr.fresh, unplaced)
            communicators.extend(c_fr)
            conclusions = _merge(conclusions, found_fr, communicators)
    order = {ev.MISSING: 0, ev.MISMATCH: 1, ev.BEHIND: 2}
    conclusions.sort(key=lambda c: order.get(c.kind, 3))
    return ev.CollectiveEvidence(
        host=host, communicators=tuple(communicators), conclusions=tuple(conclusions),
        notes=tuple(notes), ras_status=ras.status if ras else None,
        fr_status=fr.status if fr else None,
        missing_evidence=None if communicators else missing_evidence(ras, fr))


def _merge(ras: list[ev.Conclusion], fr: list[ev.Conclusion],
           groups: Sequence[ev.Communicator]) -> list[ev.Conclusion]:
    """One conclusion where RAS and FR say the same thing: FR's ranks, ops and sites, RAS's
    PIDs (and RAS's words for a missing rank: they name its PID, GPU and node)."""
    # A group whose members are 0..n-1 in order numbers its ranks as the communicator does.
    identity = {g.id: len(g.members) for g in groups if g.source == ev.SOURCE_FR
                and g.members and g.members == tuple(range(len(g.members)))}
    sizes = {g.id: g.size for g in groups if g.source == ev.SOURCE_RAS}
    out = list(ras)
    for c in fr:
        twin = next((r for r in out if r.kind == c.kind and r.source == ev.SOURCE_RAS
                     and set(r.ranks) == set(c.ranks)
                     and (r.global_ranks or identity.get(c.communicator) == sizes.get(
                         r.communicator, -1))), None)
        if twin is None:
            out.append(c)
            continue
        out[out.index(twin)] = ev.Conclusion(
            kind=c.kind, communicator=c.communicator, ranks=c.ranks,
            sentence=twin.sentence if c.kind == ev.MISSING else f"{c.sentence} NCCL RAS agrees.",
            pids=c.pids or twin.pids, ops=c.ops or twin.ops, seq=c.seq, sites=c.sites,
            source="ras+fr", global_ranks=True)
    return out


def missing_evidence(ras: ev.RasReading | None, fr: ev.FrReading | None) -> str:
    """One sentence: which collective evidence is missing, and what to set at launch next time."""
    why = []
    if ras is not None and ras.status != ev.READ:
        why.append(_STATUS_WORD.get(ras.status, ras.status))
    elif ras is not None:
        why.append("NCCL RAS reported no communicator")
    if fr is None or not fr.dumps:
        why.append("no Flight Recorder dump")
    if ras is not None and ras.status == ev.NO_NCCL:
        # gloo blocks the host inside the collective: the stacks are the evidence, no hint.
        return ("No NCCL in this job (gloo or CPU): the host stacks show which collective each "
                "rank waits in.")
    ras_hint = ("leave NCCL_RAS_ENABLE unset (RAS is on by default in NCCL >= 2.24)"
                if ras is None or ras.status in (ev.DISABLED, ev.NO_LISTENER, ev.READ)
                else "use NCCL >= 2.24 for RAS" if ras.status == ev.TOO_OLD else
                "let hangscope reach the RAS port")
    return (f"No collective evidence: {'; '.join(why)}. To have it next time, start the job "
            f"with {LAUNCH_VARS}, and {ras_hint}.")
