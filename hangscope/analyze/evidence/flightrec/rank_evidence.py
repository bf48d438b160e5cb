"""Rank numbers from the collective evidence: a PID that NCCL RAS (or the Flight Recorder's
debug-info pipe it holds open) places at a rank is that rank.

Pure. Ranks started with ``multiprocessing`` spawn carry no ``RANK`` in their environment, so
discovery numbers them by spawn order, or not at all ("PID 1063", role other). NCCL RAS names
the PID of every rank of each communicator; in the job's largest communicator (the world: its
ranks are global ranks) that PID is the global rank, whatever discovery guessed. A rank read
from a title, the environment or argv is the job's own word and is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangscope.model import Process, RankInfo, Role
from hangscope.model import nccl as ev

SOURCE = "collectives"  # RankInfo.source: NCCL RAS or the Flight Recorder placed it
_GUESSED = (None, "spawn-order")  # rank sources the evidence overrides


def _world(report: ev.RasReport) -> dict[int, tuple[int, int | None]]:
    """PID -> (global rank, world size) from the largest communicator(s) that agree."""
    comms = [c for c in report.communicators if c.size and any(r.pid for r in c.ranks)]
    if not comms:
        return {}
    size = max(c.size or 0 for c in comms)
    placed: dict[int, tuple[int, int | None]] = {}
    conflicts: set[int] = set()
    for comm in comms:
        if comm.size != size:
            continue
        for r in (*comm.ranks, *comm.missing):
            if r.pid is None:
                continue
            if placed.get(r.pid, (r.rank, size))[0] != r.rank:
                conflicts.add(r.pid)
            placed.setdefault(r.pid, (r.rank, size))
    ranks = [v[0] for p, v in placed.items() if p not in conflicts]
    if len(ranks) != len(set(ranks)):  # two PIDs at one rank: two jobs' worlds, trust neither
        return {}
    return {p: v for p, v in placed.items() if p not in conflicts}


def with_collective_ranks(processes: Sequence[Process], ras: ev.RasReading | None,
                          fr: ev.FrReading | None = None) -> tuple[Process, ...]:
    """The processes, each one RAS places in the world communicator (or that holds rank N's
    Flight Recorder debug-info pipe open) numbered as that rank (role rank), unless its rank
    came from its title, environment or argv. RAS wins where the two differ."""
    world = _world(ras.report) if ras is not None and ras.report is not None else {}
    ras_ranks = {v[0] for v in world.values()}
    for rank, pid in fr.placed if fr is not None else ():
        if pid not in world and rank not in ras_ranks:
            world[pid] = (rank, None)
    if not world:
        return tuple(processes)
    out = []
    placed: set[int] = set()
    for proc in processes:
        place = world.get(proc.pid)
        if place is None or (proc.rank is not None and proc.rank.source not in _GUESSED
                             and proc.rank.global_rank is not None):
            out.append(proc)
            continue
        rank, size = place
        placed.add(rank)
        old = proc.rank or RankInfo()
        info = replace(old, global_rank=rank, world_size=old.world_size or size, source=SOURCE)
        # a lone main process stays the job's main unless the world has more ranks
        role = Role.RANK if proc.role is Role.OTHER or (
            proc.role is Role.MAIN and (size or 0) > 1) else proc.role
        out.append(replace(proc, rank=info, role=role))
    # A spawn-order guess that now names a rank RAS placed elsewhere is no longer a number.
    return tuple(replace(p, rank=replace(p.rank, global_rank=None))
                 if p.rank is not None and p.rank.source == "spawn-order"
                 and p.rank.global_rank in placed else p for p in out)
