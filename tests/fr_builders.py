"""Flight Recorder dumps built as data, in the shape of PyTorch's own test builders.

The field set and defaults follow ``create_one_event`` / ``create_one_entry`` and
``LOADED_FR_DETAIL_TEMPLATE`` of PyTorch's test/distributed/flight_recorder/test_fr_analysis.py
(torch 2.13): a dump is ``{"entries", "pg_config", "pg_status", "version", "rank"}`` and an
entry carries ``profiling_name`` ("nccl:all_reduce", "nccl:send 0->1"), ``process_group``
(name, desc), sizes, dtypes, ``state``, ``collective_seq_id``/``p2p_seq_id`` and ``record_id``.
Used by tests/unit/test_fr_analysis.py and benchmarks/fr_compare.py (which writes them as
pickles for ``python -m torch.distributed.flight_recorder.fr_trace``).
"""

from __future__ import annotations

import copy
from typing import Any

VERSION = "2.10"


def event(op: str, ins: Any = ((4, 4),), outs: Any = ((4, 4),), state: str = "scheduled",
          seq: int = 0, p2p_seq: int = 0, out_dtypes: Any = "float32",
          pg: tuple[str, str] = ("0", "default"), in_dtypes: Any = "float32",
          backend: str = "nccl", frames: Any = ()) -> dict[str, Any]:
    """One entry as PyTorch's ``create_one_event`` builds it (dtypes as one name, as there)."""
    return {"profiling_name": f"{backend}:{op}", "state": state, "process_group": pg,
            "input_sizes": [list(s) for s in ins], "output_sizes": [list(s) for s in outs],
            "input_dtypes": in_dtypes, "output_dtypes": out_dtypes,
            "collective_seq_id": str(seq), "p2p_seq_id": str(p2p_seq), "time_created_ns": 0,
            "frames": list(frames)}


def entry(record_id: int, op: str, ins: Any, outs: Any, state: str = "completed", seq: int = 0,
          p2p_seq: int = 0, out_dtypes: Any = "float32", pg: tuple[str, str] = ("0", "default"),
          is_p2p: bool = False, **kw: Any) -> dict[str, Any]:
    """``create_one_entry``: an event with its record id and ``is_p2p``."""
    e = event(op, ins, outs, state, seq, p2p_seq, out_dtypes, pg, **kw)
    e.update(record_id=record_id, is_p2p=is_p2p)
    return e


def template() -> dict[str, dict[str, Any]]:
    """``LOADED_FR_DETAIL_TEMPLATE``: two ranks, default_pg [0, 1], and a ``sub_pg`` named
    "1" that is [0] on rank 0 and [1] on rank 1 (split groups sharing a name)."""
    base = {
        "dump_file_rank_0": {"entries": [], "rank": 0, "version": VERSION, "pg_config": {
            "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"},
            "1": {"name": "1", "desc": "sub_pg", "ranks": "[0]"}}},
        "dump_file_rank_1": {"entries": [], "rank": 1, "version": VERSION, "pg_config": {
            "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"},
            "1": {"name": "1", "desc": "sub_pg", "ranks": "[1]"}}},
    }
    return copy.deepcopy(base)


def job(world: int, groups: dict[str, tuple[str, list[list[int]]]] | None = None,
        ) -> dict[int, dict[str, Any]]:
    """Empty dumps of ``world`` ranks. ``groups``: name -> (desc, member lists); each rank's
    pg_config holds the member list it is in (a split group lists only its own part)."""
    groups = groups or {"0": ("default_pg", [list(range(world))])}
    dumps = {}
    for rank in range(world):
        config = {}
        for name, (desc, parts) in groups.items():
            mine = next((p for p in parts if rank in p), None)
            if mine is not None:
                config[name] = {"name": name, "desc": desc, "ranks": str(mine)}
        dumps[rank] = {"entries": [], "pg_config": config, "pg_status": {}, "rank": rank,
                       "version": VERSION}
    return dumps


def add(dumps: dict[int, dict[str, Any]], rank: int, op: str, ins: Any = ((4, 4),),
        outs: Any = None, pg: tuple[str, str] = ("0", "default_pg"), state: str = "scheduled",
        seq: int | None = None, dtype: str = "Float", **kw: Any) -> dict[str, Any]:
    """Append one entry to a rank's dump: the next record id; the next collective sequence id
    of its group (or of its p2p ops) unless ``seq`` is given; pg_status kept in step."""
    d = dumps[rank]
    p2p = op.startswith(("send", "recv"))
    same = [e for e in d["entries"] if e["process_group"][0] == pg[0]]
    if seq is None:
        key = "p2p_seq_id" if p2p else "collective_seq_id"
        seq = max((int(e[key]) for e in same if e["is_p2p"] == p2p), default=0) + 1
    outs = ins if outs is None else outs
    e = entry(len(d["entries"]), op, ins, outs, state,
              seq=0 if p2p else seq, p2p_seq=seq if p2p else 0, out_dtypes=[dtype] if outs
              else [], pg=pg, is_p2p=p2p, in_dtypes=[dtype] if ins else [], **kw)
    if p2p:  # p2p entries carry the collective count they follow
        e["collective_seq_id"] = str(max((int(x["collective_seq_id"]) for x in same), default=0))
    d["entries"].append(e)
    st = d["pg_status"].setdefault(pg[0], {"last_enqueued_collective": -1,
                                           "last_started_collective": -1,
                                           "last_completed_collective": -1})
    if not p2p:
        st["last_enqueued_collective"] = max(st["last_enqueued_collective"], seq)
        if state == "completed":
            st["last_completed_collective"] = max(st["last_completed_collective"], seq)
    return e


def frames(*where: tuple[str, str, int]) -> list[dict[str, Any]]:
    """A stack, innermost first: (function, file, line)."""
    return [{"name": n, "filename": f, "line": line} for n, f, line in where]
