"""Fold runs of look-alike rows of a process table: 1,000 ranks waiting in the same place are
one row ``0-997 | 100000-100997 (998)``, not 998 rows that say the same thing.

Only consecutive rows fold (the table's order is kept), only runs of ``MIN_RUN`` or more, and
only in tables of more than ``MIN_ROWS`` processes: a small job keeps one row per process.
The JSON report always keeps every process.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from hangscope.model import Process
from hangscope.words import compact_ranks
from hangscope.words import rank_label as label_of

MIN_ROWS = 32
MIN_RUN = 4

P = TypeVar("P")


class Row(Generic[P]):
    """One table row: the processes it stands for and the payload of its first process."""

    __slots__ = ("_payloads", "members", "payload")

    def __init__(self, member: Process, payload: P) -> None:
        self.members = [member]
        self.payload = payload
        self._payloads = [payload]

    def add(self, member: Process, payload: P) -> None:
        self.members.append(member)
        self._payloads.append(payload)

    def split(self) -> list[Row[P]]:
        return [Row(m, p) for m, p in zip(self.members, self._payloads, strict=True)]


def fold_rows(rows: Sequence[tuple[Process, Hashable, P]]) -> list[Row[P]]:
    """``(process, key, payload)`` rows -> rows where consecutive equal keys are one row."""
    runs: list[tuple[Hashable, Row[P]]] = []
    fold = len(rows) > MIN_ROWS
    for proc, key, payload in rows:
        if fold and runs and runs[-1][0] == key:
            runs[-1][1].add(proc, payload)
        else:
            runs.append((key, Row(proc, payload)))
    out: list[Row[P]] = []
    for _, row in runs:
        out.extend([row] if len(row.members) >= MIN_RUN or len(row.members) == 1
                   else row.split())
    return out


def rank_label(members: Sequence[Process]) -> str:
    """``3`` for one process (its rank label), ``0-997`` for a run of ranks, ``-`` without."""
    if len(members) == 1:
        proc = members[0]
        return label_of(proc.rank)
    ranks = [p.rank.global_rank for p in members
             if p.rank is not None and p.rank.global_rank is not None]
    return compact_ranks(ranks) if len(ranks) == len(members) else "-"


def pid_label(members: Sequence[Process]) -> str:
    """``12`` for one process; ``100 PIDs`` for a run (every PID is in the JSON report)."""
    if len(members) == 1:
        return str(members[0].pid)
    return f"{len(members)} PIDs"


def pid_host(proc: Process, several: bool) -> str:
    """``PID 14``, or ``PID 14 on node03`` where the job spans hosts (PIDs repeat there)."""
    return f"PID {proc.pid} on {proc.host}" if several and proc.host else f"PID {proc.pid}"
