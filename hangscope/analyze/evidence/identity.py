"""A rank is its coordinates: read them, label them, key them, and say which ranks compare.

Pure functions over the model; no I/O. Sources, strongest first: the process title that SGLang
and vLLM set (``sglang::scheduler_DP1_TP1``, ``sglang::scheduler_PP2_TP1``,
``sglang::scheduler_TP3_EP3``, ``..._ATTN_CP1``, ``..._MOE_DP1``; ``VLLM::Worker_DP0_PP1_TP0``,
``VLLM::Worker_TP0_DCP0``, ``VLLM::EngineCore_DP1``; the field order varies), then the rank's
RankInfo (filled from title or environment by roles.role_and_rank), then the environment
(``SGLANG_DP_RANK``, ``RANK``, ``LOCAL_RANK``).

Two ranks of different DP replicas both have TP rank 1; printing both as "rank 1" made the
verdict call one of them the odd one out of a group it does not belong to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hangscope.analyze.evidence.roles import int_or_none
from hangscope.model import Process, Snapshot
from hangscope.titles import title_coordinates
from hangscope.words import LABEL_AXES, coordinates_label

#: Axes in the order a label names them (outermost replica first): words.AXES.
AXES = LABEL_AXES


def coordinates(proc: Process) -> dict[str, int]:
    """Every coordinate known of a process: title first, then RankInfo, then environment."""
    out = title_coordinates(proc.title)
    info = proc.rank
    # (Each test first: asked of every rank, and most ranks have none of these.)
    if info is not None and (info.dp is not None or info.pp is not None
                             or info.tp is not None or info.ep is not None):
        for axis in ("dp", "pp", "tp", "ep"):
            value = getattr(info, axis)
            if value is not None:
                out.setdefault(axis, value)
    env_dp = proc.environ.get("SGLANG_DP_RANK")
    dp = int_or_none(env_dp) if env_dp is not None else None
    if dp is not None:
        out.setdefault("dp", dp)
    return out


def coordinates_source(proc: Process) -> tuple[object, ...]:
    """Everything :func:`coordinates` reads of a process: equal sources, equal coordinates
    (131,072 ranks have a handful, so a caller derives from each source once)."""
    info = proc.rank
    return (proc.title, None if info is None else (info.dp, info.pp, info.tp, info.ep),
            proc.environ.get("SGLANG_DP_RANK"))


__all__ = ["coordinates_label", "title_coordinates"]  # the one parser and label, re-exported


def rank_label(proc: Process) -> str:
    """How a rank is named everywhere: ``DP1·TP1``, ``rank 3``, else ``PID 123``."""
    coords = coordinates(proc)
    # A lone TP coordinate is the rank number users know ("rank 3" of a TP-only job).
    if coords and set(coords) != {"tp"}:
        label = coordinates_label(coords)
        global_rank = proc.rank.global_rank if proc.rank else None
        return label if global_rank is None else f"{label} (rank {global_rank})"
    if proc.rank is not None and proc.rank.key is not None:
        return f"rank {proc.rank.key}"
    return f"PID {proc.pid}"


def group_labels(snap: Snapshot, pids: Iterable[int]) -> str:
    """``rank 0, rank 2``: the :func:`rank_label` of each of ``pids`` the snapshot has."""
    return ", ".join(rank_label(p) for pid in pids if (p := snap.process(pid)) is not None)


def rank_key(proc: Process) -> tuple[object, ...]:
    """A key no two processes of a job share: host, every coordinate, global rank (else PID)."""
    coords = coordinates(proc)
    global_rank = proc.rank.global_rank if proc.rank else None
    local_rank = proc.rank.local_rank if proc.rank else None
    if not coords and global_rank is None and local_rank is None:
        return (proc.host, "pid", proc.pid)
    return (proc.host if global_rank is None else None,
            tuple(coords.get(a) for a in AXES), global_rank,
            local_rank if global_rank is None and not coords else None)


def duplicate_labels(procs: Sequence[Process]) -> dict[str, tuple[int, ...]]:
    """Labels that name two or more processes (label -> PIDs): a bug to show, never to merge."""
    seen: dict[str, list[int]] = {}
    for proc in procs:
        seen.setdefault(rank_label(proc), []).append(proc.pid)
    return {label: tuple(pids) for label, pids in seen.items() if len(pids) > 1}


def replica_key(proc: Process, axis: str = "tp") -> tuple[tuple[str, int], ...]:
    """The coordinates that name ``proc``'s process group along ``axis``: all but ``axis`` and
    the axes inside it (EP and MoE-DP partition the TP ranks; they do not make a new group)."""
    coords = coordinates(proc)
    if not coords:
        return ()
    inner = {axis, "ep", "moe_ep", "moe_dp"} if axis == "tp" else {axis}
    return tuple((a, v) for a, v in sorted(coords.items()) if a not in inner)


def comparable_groups(procs: Sequence[Process], axis: str = "tp") -> list[list[Process]]:
    """Ranks that take part in the same ``axis`` collectives (one TP group per DP replica and
    PP stage): only these may be compared to find an odd one out."""
    groups: dict[tuple[tuple[str, int], ...], list[Process]] = {}
    keys: dict[tuple[object, ...], tuple[tuple[str, int], ...]] = {}  # by coordinates_source
    last: tuple[object, ...] | None = None  # the source before: ranks repeat their neighbour's
    members: list[Process] = []
    for proc in procs:
        source = coordinates_source(proc)
        if source == last:  # (a compare of fresh strings, where a lookup hashes them first)
            members.append(proc)
            continue
        last = source
        key = keys.get(source)
        if key is None:
            key = keys[source] = replica_key(proc, axis)
        members = groups.get(key)
        if members is None:
            members = groups[key] = []
        members.append(proc)
    return list(groups.values())
