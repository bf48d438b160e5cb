"""Whether two ranks' Flight Recorder entries for one collective agree, op by op.

Pure. What must agree depends on the op (PyTorch's own analyser, ``fr_trace``, applies the same
facts; the test vectors of its test suite are in tests/unit/test_fr_analysis.py):

- ``scatter``: only the root has inputs (the list it scatters); ``gather``: only the root has
  outputs; ``all_to_all*``: each rank's split may be uneven, so only the totals over every
  member agree (sent elements = received elements).
- ``all_reduce``: output = input; ``all_gather``: output elements = input elements x group size;
  ``reduce_scatter``: input elements = output elements x group size (summed over the tensors
  of a list, so gloo's list outputs are not a false mismatch).
- dtypes: input = output except where a root's side is empty (scatter, gather, broadcast).
- A coalesced collective (NCCL records each op with the group's sequence id, then a
  ``coalesced`` marker) agrees when every op in it agrees; a whole extra group on one rank
  that the other issued empty is accepted, as fr_trace does.
- Entry state (scheduled < started < completed) is compared last: a rank that has not started
  what another completed is behind, not mismatched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hangscope.model import nccl as ev

STATE_ORDER = {"scheduled": 0, "started": 1, "completed": 2}
MARKERS = frozenset({"coalesced", "ALLGATHER_coalesced", "REDUCE_SCATTER_coalesced"})
_GATHERS = frozenset({"all_gather", "_all_gather_base", "all_gather_into_tensor",
                      "all_gather_into_tensor_coalesced"})
_SCATTERS = frozenset({"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor",
                       "reduce_scatter_tensor_coalesced"})
_REDUCES = frozenset({"all_reduce", "allreduce_coalesced"})


@dataclass(frozen=True)
class Diff:
    """What differs between two entry lists of one sequence id, and at which entry."""

    what: str  # op | sizes | dtype | coalesced | state
    detail: str
    index: int = 0
    field: str = ""  # sizes: "input" or "output", the side of the entries that differs


def numel(sizes: Sequence[Sequence[int]]) -> int:
    return sum(math.prod(s) for s in sizes)


def is_all_to_all(op: str) -> bool:
    return op.startswith("all_to_all")


def _shown(sizes: Sequence[Sequence[int]]) -> str:
    return str([list(s) for s in sizes])


def _has(sizes: Sequence[Sequence[int]], dtypes: Sequence[str]) -> bool:
    return bool(sizes) and bool(sizes[0]) and bool(dtypes)


def _self_diff(e: ev.FrEntry, size: int) -> str | None:
    """An entry that contradicts itself: output sizes that its op cannot produce."""
    if e.op in _REDUCES and e.input_sizes != e.output_sizes:
        return f"{e.op} of {_shown(e.input_sizes)} into {_shown(e.output_sizes)}"
    if size > 0 and e.input_sizes and e.output_sizes:
        if e.op in _GATHERS and numel(e.output_sizes) != numel(e.input_sizes) * size:
            return (f"{e.op} of {numel(e.input_sizes)} elements x {size} ranks into "
                    f"{numel(e.output_sizes)}")
        if e.op in _SCATTERS and numel(e.input_sizes) != numel(e.output_sizes) * size:
            return (f"{e.op} of {numel(e.input_sizes)} elements into {numel(e.output_sizes)} "
                    f"x {size} ranks")
    return None


def _dtype_diff(a: ev.FrEntry, b: ev.FrEntry) -> str | None:
    op = a.op
    for e in (a, b):
        if (op not in ("scatter", "gather", "broadcast") and _has(e.input_sizes, e.input_dtypes)
                and _has(e.output_sizes, e.output_dtypes)
                and set(e.input_dtypes) != set(e.output_dtypes)):
            return f"{'/'.join(e.input_dtypes)} into {'/'.join(e.output_dtypes)}"
    if (op not in ("scatter", "broadcast") and _has(a.input_sizes, a.input_dtypes)
            and _has(b.input_sizes, b.input_dtypes) and set(a.input_dtypes) != set(b.input_dtypes)):
        return f"{'/'.join(a.input_dtypes)} vs {'/'.join(b.input_dtypes)}"
    if (op != "gather" and _has(a.output_sizes, a.output_dtypes)
            and _has(b.output_sizes, b.output_dtypes)
            and set(a.output_dtypes) != set(b.output_dtypes)):
        return f"outputs {'/'.join(a.output_dtypes)} vs {'/'.join(b.output_dtypes)}"
    return None


def entry_diff(a: ev.FrEntry, b: ev.FrEntry, size: int) -> Diff | None:
    """The first thing two ranks' entries for the same collective disagree on, state aside."""
    if a.op != b.op:
        return Diff("op", f"{a.op} vs {b.op}")
    if a.op in MARKERS:
        return None
    a2a = is_all_to_all(a.op)
    if not a2a and a.op != "scatter" and a.input_sizes != b.input_sizes:
        return Diff("sizes", f"inputs {_shown(a.input_sizes)} vs {_shown(b.input_sizes)}",
                    field="input")
    if not a2a and a.op != "gather" and a.output_sizes != b.output_sizes:
        return Diff("sizes", f"outputs {_shown(a.output_sizes)} vs {_shown(b.output_sizes)}",
                    field="output")
    own = _self_diff(a, size) or _self_diff(b, size)
    if own:
        return Diff("sizes", own)
    dtype = _dtype_diff(a, b)
    return Diff("dtype", dtype) if dtype else None


def _real_ops(entries: Sequence[ev.FrEntry]) -> int:
    return sum(1 for e in entries if e.op not in MARKERS)


def list_diff(xs: Sequence[ev.FrEntry], ys: Sequence[ev.FrEntry], size: int) -> Diff | None:
    """Two ranks' entries of one sequence id (one, or a coalesced group): the first op that
    differs, a coalesced group of a different length, else None (state is :func:`state_diff`)."""
    for i, (a, b) in enumerate(zip(xs, ys, strict=False)):
        d = entry_diff(a, b, size)
        if d is not None:
            return Diff(d.what, d.detail, i, d.field)
    if len(xs) != len(ys):
        n = min(len(xs), len(ys))
        tail = (xs if len(xs) > len(ys) else ys)[n:]
        if tail[-1].op in MARKERS and _real_ops(tail):
            return None  # a whole coalesced group the other rank issued empty (fr_trace's case)
        return Diff("coalesced", f"{_real_ops(xs)} vs {_real_ops(ys)} ops in the collective", n)
    return None


def state_diff(xs: Sequence[ev.FrEntry], ys: Sequence[ev.FrEntry]) -> Diff | None:
    for i, (a, b) in enumerate(zip(xs, ys, strict=False)):
        if a.state in STATE_ORDER and b.state in STATE_ORDER and a.state != b.state:
            return Diff("state", f"{a.state} vs {b.state}", i)
    return None


def exact_key(entries: Sequence[ev.FrEntry]) -> tuple:
    """Entries that are equal in every compared field are equal: the fast path of a seq."""
    if len(entries) == 1:  # nearly every seq (one per rank and seq: 64,000 for 32 x 2,000)
        e = entries[0]
        return ((e.op, e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes),)
    return tuple([(e.op, e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes)
                  for e in entries])


def all_to_all_totals(views: Sequence[Sequence[ev.FrEntry]]) -> tuple[int, int] | None:
    """(elements sent, elements received) over every member of an all_to_all, where they
    differ: the only size fact an uneven all_to_all_single must keep."""
    sent = sum(numel(e.input_sizes) for v in views for e in v if is_all_to_all(e.op))
    received = sum(numel(e.output_sizes) for v in views for e in v if is_all_to_all(e.op))
    return (sent, received) if sent != received else None
