"""The expected world against the ranks found: which ranks are missing, and what is left of them.

Pure functions over the model; no I/O. Sources of the expected world, strongest first:

- the ranks' own environment (torchrun, DeepSpeed, Slurm): ``WORLD_SIZE``; on one node of a
  multi-node job ``LOCAL_WORLD_SIZE`` and ``RANK - LOCAL_RANK``, which name the global ranks
  this node should run;
- the launcher's flags (``--tp-size``, ``--pp-size``, ``--dp-size``, ``--nproc-per-node``,
  ``--nnodes``), which name coordinates: SGLang runs ``dp x pp x tp`` schedulers, or ``pp x tp``
  with ``--enable-dp-attention`` (the DP ranks then partition the TP ranks);
- ``Job.expected_ranks`` (roles.expected_ranks) as a count when nothing names the ranks.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from hangscope.analyze.evidence.identity import coordinates, coordinates_label
from hangscope.analyze.evidence.roles import int_or_none
from hangscope.frameworks.torch_distributed import in_agent_rendezvous
from hangscope.model import Job, Process, Role
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
