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
    # "group|p2p" -> last seq, kept in the dump (both analysers ignore unknown keys): no
    # rescan of the buffer per entry at 2,000 entries
    counts = d.setdefault("builder_counts", {})
    last = counts.get(f"{pg[0]}|{p2p}", 0)
    if seq is None:
        seq = last + 1
    counts[f"{pg[0]}|{p2p}"] = max(last, seq)
    outs = ins if outs is None else outs
    e = entry(len(d["entries"]), op, ins, outs, state,
              seq=0 if p2p else seq, p2p_seq=seq if p2p else 0, out_dtypes=[dtype] if outs
              else [], pg=pg, is_p2p=p2p, in_dtypes=[dtype] if ins else [], **kw)
    if p2p:  # p2p entries carry the collective count they follow
        e["collective_seq_id"] = str(counts.get(f"{pg[0]}|False", 0))
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


# --- cases fr_trace gets wrong (issue 19), each a job of dumps -------------------------

def _lag_third_hides_mismatch() -> dict[int, dict[str, Any]]:
    d = job(3)
    for r in range(3):
        add(d, r, "all_reduce", [[16]])
        add(d, r, "all_reduce", [[16]])
    add(d, 0, "all_reduce", [[16]])
    add(d, 1, "broadcast", [[16]])
    return d


def _split_groups_same_name() -> dict[int, dict[str, Any]]:
    d = job(4, {"0": ("default_pg", [[0, 1, 2, 3]]), "5": ("tp", [[0, 1], [2, 3]])})
    for r in range(4):
        add(d, r, "all_reduce", [[8]])
        add(d, r, "all_reduce" if r < 2 else "broadcast", [[8]], pg=("5", "tp"))
    return d


def _ok_scatter_uneven_a2a() -> dict[int, dict[str, Any]]:
    d = job(3)
    for r in range(3):
        add(d, r, "scatter", [[3, 4]] if r == 0 else [], [[4]])
        add(d, r, "gather", [[4]], [[3, 4]] if r == 0 else [])
        add(d, r, "all_to_all", [[sum(r + j + 1 for j in range(3))]],
              [[sum(j + r + 1 for j in range(3))]])
    return d


def _a2a_totals_differ() -> dict[int, dict[str, Any]]:
    d = job(2)
    add(d, 0, "all_to_all", [[6]], [[6]])
    add(d, 1, "all_to_all", [[6]], [[4]])
    return d


def _all_gather_base_size() -> dict[int, dict[str, Any]]:
    d = job(2)
    for r in range(2):
        add(d, r, "_all_gather_base", [[4]], [[6]])  # both: 6 is not 4 elements x 2 ranks
    return d


def _ok_all_gather_list() -> dict[int, dict[str, Any]]:
    d = job(2)
    for r in range(2):
        add(d, r, "all_gather", [[4]], [[4], [4]])
    return d


def _coalesced_entry_differs() -> dict[int, dict[str, Any]]:
    d = job(2)
    for r in range(2):
        add(d, r, "all_reduce", [[4]], seq=1)
        add(d, r, "all_reduce", [[4]] if r == 0 else [[9]], seq=1)
        add(d, r, "coalesced", [], [], seq=1)
    return d


def _coalesced_length_differs() -> dict[int, dict[str, Any]]:
    d = job(2)
    for r in range(2):
        add(d, r, "all_reduce", [[4]], seq=1)
        if r == 0:
            add(d, r, "all_reduce", [[4]], seq=1)
        add(d, r, "coalesced", [], [], seq=1)
    return d


def _p2p_sizes_differ() -> dict[int, dict[str, Any]]:
    d = job(2)
    add(d, 0, "send 0->1", [[4]], [])
    add(d, 1, "recv 1<-0", [], [[8]])
    return d


def _p2p_no_recv() -> dict[int, dict[str, Any]]:
    d = job(2)
    add(d, 0, "send 0->1", [[4]], [])
    add(d, 1, "all_reduce", [[4]])
    add(d, 0, "all_reduce", [[4]])
    return d


def _ok_p2p() -> dict[int, dict[str, Any]]:
    d = job(2)
    add(d, 0, "send 0->1", [[4]], [])
    add(d, 1, "recv 1<-0", [], [[4]])
    return d


def _state_not_started() -> dict[int, dict[str, Any]]:
    d = job(2)
    add(d, 0, "all_reduce", [[4]], state="completed")
    add(d, 1, "all_reduce", [[4]], state="scheduled")
    return d


def _ok_wrapped_coalesced() -> dict[int, dict[str, Any]]:
    d = job(2)
    for r in range(2):
        for _ in range(3):
            add(d, r, "all_reduce", [[4]], seq=5)
        add(d, r, "coalesced", [], [], seq=5)
        add(d, r, "all_reduce", [[4]])
    del d[1]["entries"][0]  # rank 1's ring buffer wrapped: its first entry of #5 is gone
    return d


# --- issue 35's false verdicts, each in another shape than the one reported ------------------

def _stopped_before_subgroup(stopped: bool = True) -> dict[int, dict[str, Any]]:
    """tp groups [0, 1] and [2, 3]: rank 3 stopped before its group's first collective (its
    status lists the group, -1: nothing enqueued) while rank 2 waits in it."""
    d = job(4, {"0": ("default_pg", [[0, 1, 2, 3]]), "5": ("tp", [[0, 1], [2, 3]])})
    for r in range(4):
        for _ in range(2):
            add(d, r, "all_reduce", [[8]], state="completed")
        if r != 3 or not stopped:
            add(d, r, "_all_gather_base", [[4]], [[8]], pg=("5", "tp"),
                state="started" if stopped else "completed")
    d[3]["pg_status"].setdefault("5", {"last_enqueued_collective": -1,
                                       "last_started_collective": -1,
                                       "last_completed_collective": -1})
    return d


def _wrapped_two_ranks_odd_dtype(odd: bool = True) -> dict[int, dict[str, Any]]:
    """Rank 1 reduces Half where the others reduce Float, from #1 on; rank 0's and rank 2's
    ring buffers wrapped (they hold #4 and #5 on), rank 1's did not."""
    d = job(3)
    for r in range(3):
        for _ in range(8):
            add(d, r, "all_reduce", [[16]], state="completed",
                dtype="Half" if odd and r == 1 else "Float")
    del d[0]["entries"][:3]
    del d[2]["entries"][:4]
    return d


def _recv_ring(matched: bool = False) -> dict[int, dict[str, Any]]:
    """Three ranks pass a tensor round a ring (completed), then each receives from its next
    neighbour and nobody sends (``matched``: the second round is sends and receives too)."""
    d = job(3)
    for r in range(3):
        add(d, r, "all_reduce", [[4]], state="completed")
    for r in range(3):
        nxt, prev = (r + 1) % 3, (r - 1) % 3
        add(d, r, f"send {r}->{nxt}", [[4]], [], state="completed")
        add(d, r, f"recv {r}<-{prev}", [], [[4]], state="completed")
    for r in range(3):
        nxt, prev = (r + 1) % 3, (r - 1) % 3
        if matched:
            add(d, r, f"send {r}->{prev}", [[4]], [], state="completed")
        add(d, r, f"recv {r}<-{nxt}", [], [[4]], state="completed" if matched else "started")
    return d


def _all_gather_outputs_differ(odd: bool = True) -> dict[int, dict[str, Any]]:
    """Four ranks gather equal inputs into a list of outputs; rank 2's list has 3 tensors."""
    d = job(4)
    for r in range(4):
        add(d, r, "all_reduce", [[4]], state="completed")
        add(d, r, "all_gather", [[2, 4]], [[2, 4]] * (3 if odd and r == 2 else 4),
            state="started")
    return d


CASES = {
    "lag_third_hides_mismatch": _lag_third_hides_mismatch,
    "split_groups_same_name": _split_groups_same_name,
    "ok_scatter_uneven_a2a": _ok_scatter_uneven_a2a,
    "a2a_totals_differ": _a2a_totals_differ,
    "all_gather_base_size": _all_gather_base_size,
    "ok_all_gather_list": _ok_all_gather_list,
    "coalesced_entry_differs": _coalesced_entry_differs,
    "coalesced_length_differs": _coalesced_length_differs,
    "p2p_sizes_differ": _p2p_sizes_differ,
    "p2p_no_recv": _p2p_no_recv,
    "ok_p2p": _ok_p2p,
    "state_not_started": _state_not_started,
    "ok_wrapped_coalesced": _ok_wrapped_coalesced,
    "stopped_before_subgroup": _stopped_before_subgroup,
    "ok_subgroup_reached": lambda: _stopped_before_subgroup(stopped=False),
    "wrapped_two_ranks_odd_dtype": _wrapped_two_ranks_odd_dtype,
    "ok_wrapped_two_ranks": lambda: _wrapped_two_ranks_odd_dtype(odd=False),
    "recv_ring": _recv_ring,
    "ok_p2p_ring": lambda: _recv_ring(matched=True),
    "all_gather_outputs_differ": _all_gather_outputs_differ,
    "ok_all_gather_outputs": lambda: _all_gather_outputs_differ(odd=False),
}
