"""The expected world against the ranks found: which ranks are missing, and what is left of them.

Pure functions over the model; no I/O. Sources of the expected world, strongest first:

- the ranks' own environment (torchrun, DeepSpeed, Slurm): ``WORLD_SIZE``; on one node of a
  multi-node job ``LOCAL_WORLD_SIZE`` and ``RANK - LOCAL_RANK``, which name the global ranks
  this node should run;
- the launcher's flags (``--tp-size``, ``--pp-size``, ``--dp-size``, ``--nproc-per-node``,
  ``--nnodes``), which name coordinates: SGLang runs ``dp x pp x tp`` schedulers, or ``pp x tp``
  with ``--enable-dp-attention`` (the DP ranks then partition the TP ranks);
- the arguments of the ranks' ``init_process_group`` calls (``rank``, ``world_size``), read
  from a rank still inside it (an ``mp.spawn`` job passes them; no environment says them);
- ``Job.expected_ranks`` (roles.expected_ranks) as a count when nothing names the ranks.

A rank still inside ``init_process_group`` waits in the rendezvous for the others; its
arguments say how many it waits for (pytorch#8091: ``nprocs=2`` spawned for a config's
``world_size=3``: ranks 0 and 1 wait for a rank 2 nobody started). ``py-spy dump --locals``
of such a rank reads them (analyze/evidence/locals_wanted.py asks it).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hangscope.analyze.evidence.identity import coordinates, coordinates_label
from hangscope.analyze.evidence.pylocals import as_int, as_str, frame_locals, thread_frames
from hangscope.analyze.evidence.roles import int_or_none
from hangscope.frameworks import frame_at
from hangscope.frameworks.torch_distributed import (
    INIT_GROUP,
    STORE_CREATE,
    in_agent_rendezvous,
    in_init_group,
)
from hangscope.model import Job, Process, Role
from hangscope.model.waits import WaitEvidence
from hangscope.words import compact_ranks


@dataclass(frozen=True)
class MissingRanks:
    """The ranks a job should have and does not."""

    expected: int
    source: str  # what says so: "WORLD_SIZE=4", "--dp-size 2 --tp-size 2"
    found: tuple[str, ...]  # labels of the ranks found: "0", "DP1·TP0"
    missing: tuple[str, ...]  # labels of the ranks missing; empty when only the count is known
    count_missing: int
    exited: tuple[tuple[int, int | None], ...] = ()  # (PID, exit code) of unreaped exited ranks
    numbered: bool = True  # labels are global rank numbers


def _env_world(ranks: Sequence[Process]) -> tuple[set[int], str] | None:
    """The global rank numbers this node should run, from the ranks' environment."""
    for proc in ranks:
        env = proc.environ
        world, rank, local = (int_or_none(env.get(k)) for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"))
        local_world = int_or_none(env.get("LOCAL_WORLD_SIZE"))
        if world is None:
            continue
        if local_world and local_world < world and rank is not None and local is not None:
            base = rank - local
            return (set(range(base, base + local_world)),
                    f"LOCAL_WORLD_SIZE={local_world} of WORLD_SIZE={world}")
        return set(range(world)), f"WORLD_SIZE={world}"
    return _slurm_world(ranks)


def _slurm_world(ranks: Sequence[Process]) -> tuple[set[int], str] | None:
    """Ranks that take their place from Slurm alone (no WORLD_SIZE on any: Lightning's and
    torch's SLURM environments): one task per rank, each started by srun. A script run with
    ``python`` in the allocation is one task of them, its peers never started (Lightning#8707).
    (torchrun started by srun sets WORLD_SIZE in its ranks: one task per node, not per rank.)"""
    for proc in ranks:
        env = proc.environ
        tasks = int_or_none(env.get("SLURM_NTASKS"))
        if tasks is not None and "SLURM_PROCID" in env and "RANK" not in env:
            return set(range(tasks)), (f"SLURM_NTASKS={tasks}: one task per rank, each "
                                       "started by srun")
    return None


_AXES = {"dp": ("--dp-size", "--dp", "--data-parallel-size", "-dp"),
         "pp": ("--pp-size", "--pp", "--pipeline-parallel-size", "-pp"),
         "tp": ("--tp-size", "--tp", "--tensor-parallel-size", "-tp")}


def _flag_world(job: Job) -> tuple[set[tuple[tuple[str, int], ...]], str] | None:
    """The coordinates the launcher's flags ask for (SGLang-style schedulers)."""
    sizes: dict[str, int] = {}
    said = []
    for axis, flags in _AXES.items():
        for flag in flags:
            size = int_or_none(job.args.get(flag))
            if size:
                sizes[axis] = size
                said.append(f"{flag} {size}")
                break
    if "tp" not in sizes or (job.kind != "sglang" and set(sizes) != {"tp"}):
        return None
    if "--enable-dp-attention" in job.args:
        sizes.pop("dp", None)  # DP attention: the DP ranks partition the TP ranks
    axes = [a for a in ("dp", "pp", "tp") if a in sizes]
    expected = {tuple(zip(axes, values, strict=True))
                for values in itertools.product(*(range(sizes[a]) for a in axes))}
    return expected, " ".join(said)


#: ``RankInfo.source`` of a rank numbered by its ``init_process_group`` arguments.
SOURCE = "init_process_group"


def in_init(proc: Process) -> bool:
    """Its working thread is inside ``init_process_group`` (its arguments are worth a read)."""
    thread = proc.working_thread
    return thread is not None and in_init_group(thread.frames)


def init_args(threads: Sequence[object], tid: int | None) -> tuple[int | None, int | None]:
    """(rank, world_size) of the ``init_process_group`` frame of thread ``tid`` in a
    ``--locals`` dump; a world of -1 (the default: "from the environment") is no world."""
    for frame in thread_frames(threads, tid):
        if frame_at(str(frame.get("name") or ""), str(frame.get("filename") or ""), INIT_GROUP):
            values: Mapping[str, object] = frame_locals(frame)
            rank, world = as_int(values.get("rank")), as_int(values.get("world_size"))
            return (rank if rank is not None and rank >= 0 else None,
                    world if world is not None and world > 0 else None)
    return None, None


def init_store(threads: Sequence[object], tid: int | None) -> str | None:
    """``host:port`` of the TCPStore the rendezvous of thread ``tid`` creates or connects to
    (``_create_c10d_store``'s arguments in a ``--locals`` dump)."""
    for frame in thread_frames(threads, tid):
        if frame_at(str(frame.get("name") or ""), str(frame.get("filename") or ""),
                    STORE_CREATE):
            values = frame_locals(frame)
            host, port = as_str(values.get("hostname")), as_int(values.get("port"))
            return f"{host}:{port}" if host and port else None
    return None


def with_init_args(procs: Sequence[Process], waits: WaitEvidence | None) -> tuple[Process, ...]:
    """Ranks numbered by the arguments of their ``init_process_group`` call, where it was read:
    stronger than their start order; the world size they were given, where none was known."""
    reads = [r for r in waits.locals if r.init_world is not None] if waits is not None else []
    if not reads:
        return tuple(procs)
    pids = [p.pid for p in procs]
    read = {r.pid: r for r in reads if pids.count(r.pid) == 1}  # a PID unique in the job
    out = []
    for proc in procs:
        r = read.get(proc.pid)
        if r is None or proc.role is not Role.RANK or proc.rank is None:
            out.append(proc)
            continue
        info = proc.rank
        if info.source == "spawn-order" and r.init_rank is not None:
            info = replace(info, global_rank=r.init_rank, source=SOURCE)
        if info.world_size is None:
            info = replace(info, world_size=r.init_world)
        out.append(replace(proc, rank=info))
    return tuple(out)


def declared_world(ranks: Sequence[Process]) -> int | None:
    """The one world size the ranks' ``init_process_group`` calls were given (None: none was
    read, or they disagree)."""
    worlds = {p.rank.world_size for p in ranks if p.rank is not None
              and p.rank.world_size is not None and p.rank.source in (SOURCE, "spawn-order")}
    return worlds.pop() if len(worlds) == 1 else None


def finished_ranks(processes: Sequence[Process]) -> tuple[Process, ...]:
    """Ranks that exited with code 0: zombies whose exit status says so (a zombie has no
    environment left to read: a child of the job's of no other role counts, as below)."""
    return tuple(p for p in processes if p.is_zombie and p.exit_code == 0
                 and p.role in (Role.RANK, Role.OTHER))


def missing_ranks(processes: Sequence[Process], job: Job) -> MissingRanks | None:
    """Expected against found: None when every expected rank is there (or nothing says)."""
    ranks = [p for p in processes if p.role is Role.RANK and not p.is_exited]
    exited = tuple((p.pid, p.exit_code) for p in processes
                   if p.is_zombie and p.role in (Role.RANK, Role.OTHER))
    env = _env_world(ranks)
    if env is not None:
        expected, source = env
        found = {p.rank.global_rank for p in ranks if p.rank and p.rank.global_rank is not None}
        missing = sorted(expected - found)
        if not missing:
            return None
        return MissingRanks(len(expected), source, (compact_ranks(found & expected),),
                            (compact_ranks(missing),), len(missing), exited)
    declared = declared_world(ranks)
    if declared is not None:  # an mp.spawn job's init_process_group(world_size=...)
        found = {p.rank.global_rank for p in ranks if p.rank and p.rank.global_rank is not None}
        missing = sorted(set(range(declared)) - found)
        if not missing:
            return None
        return MissingRanks(declared, f"world_size={declared} passed to init_process_group",
                            (compact_ranks(found & set(range(declared))),),
                            (compact_ranks(missing),), len(missing), exited)
    flags = _flag_world(job)
    if flags is not None:
        want, source = flags
        axes = [a for a, _ in next(iter(want))]
        have = {tuple((a, c.get(a, 0)) for a in axes)
                for p in ranks if (c := coordinates(p))}
        gone = sorted(want - have)
        if not gone:
            return None
        if axes == ["tp"]:  # a TP-only job: the TP ranks are the rank numbers users know
            return MissingRanks(len(want), source, (compact_ranks(k[0][1] for k in have & want),),
                                (compact_ranks(k[0][1] for k in gone),), len(gone), exited)
        return MissingRanks(len(want), source,
                            tuple(coordinates_label(dict(k)) for k in sorted(have & want)),
                            tuple(coordinates_label(dict(k)) for k in gone), len(gone), exited,
                            numbered=False)
    if job.expected_ranks and len(ranks) < job.expected_ranks:
        return MissingRanks(job.expected_ranks, job.expected_source or "the launcher",
                            (), (), job.expected_ranks - len(ranks), exited)
    return None


def describe_missing(m: MissingRanks, unstarted: bool = False) -> str:
    """``expected 4 ranks (WORLD_SIZE=4), found 0-2: rank 3 is missing; ...``; ``unstarted``:
    the launcher has not started them yet (it waits for the other nodes)."""
    found = ", ".join(m.found) if m.found and m.found != ("-",) else "none"
    if m.numbered and found.isdigit():  # "found 0" would read as a count
        found = f"rank {found}"
    text = f"expected {m.expected} ranks ({m.source}), found {found}"
    if m.missing:
        many = m.count_missing > 1
        names = ", ".join(m.missing)
        text += f": {'ranks' if many else 'rank'} {names} {'are' if many else 'is'} missing"
    else:
        text += f": {m.count_missing} missing"
    if m.exited:
        codes = "; ".join(f"PID {pid} exited" + (f" with code {code}" if code is not None else "")
                          for pid, code in m.exited)
        text += f" ({codes}, not reaped yet)"
    elif unstarted:
        text += " (not started yet)"
    else:
        text += " (no process is left of it: it exited and was reaped, or never started)"
    return text


def waits_for_nodes(job: Job, procs: Sequence[Process]) -> tuple[Process, str] | None:
    """A launcher of no rank yet, in torchrun's rendezvous for the other nodes' agents (``--nnodes
    N``), and what to say of it: the ranks are missing because a node never joined."""
    agent = next((p for p in procs if p.working_thread is not None
                  and in_agent_rendezvous(p.working_thread.frames)), None)
    if agent is None:
        return None
    nodes = job.args.get("--nnodes")
    asked = f" (--nnodes {nodes})" if nodes else ""
    return agent, (f"PID {agent.pid}, torchrun's agent, waits in its rendezvous for the other "
                   f"nodes{asked}: "
                   "it starts no rank until enough nodes' agents have joined; start torchrun "
                   "on the other nodes with the same --rdzv-endpoint and --rdzv-id, or run "
                   "with --nnodes 1")
