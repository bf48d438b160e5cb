"""The "Collectives" section: per communicator, each rank's position, missing ranks, the first
disagreement and the source (NCCL RAS, Flight Recorder), from ``Snapshot.collectives``.

Plain rows first (shared by the text report, Markdown and the TUI), then the Rich renderable.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from hangscope.model import Snapshot
from hangscope.model import nccl as ev

SOURCE_NAME = {ev.SOURCE_RAS: "NCCL RAS", ev.SOURCE_FR: "Flight Recorder"}
HEADER = ("comm rank", "rank", "pid", "gpu", "host", "position", "status")


@dataclass(frozen=True)
class CommTable:
    """One communicator, ready to print."""

    title: str  # "communicator 0x44cd… (NCCL RAS) · 2 ranks · RUNNING MISMATCH"
    rows: tuple[tuple[str, ...], ...]  # cells under HEADER
    missing: tuple[str, ...]  # one sentence per missing rank
    disagreement: str | None  # the first sequence where the ranks issued different collectives


def position(p: ev.RankPosition) -> str:
    """Where a rank is: ``AllReduce 2`` (RAS counts) or ``#2 all_reduce started`` (FR)."""
    if p.counts:  # the ops this rank launched (RAS lists every op, mostly at 0)
        return ", ".join(f"{op} {n}" for op, n in sorted(p.counts.items()) if n) or "none yet"
    if p.last_enqueued is None:
        return "-"
    text = f"#{p.last_enqueued} {p.last_op or '?'}"
    if p.last_state:
        text += f" {p.last_state}"
    if p.last_completed is not None and p.last_completed != p.last_enqueued:
        text += f" (done #{p.last_completed})"
    return text


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _disagreement(d: ev.Disagreement) -> str:
    sides = "; ".join(
        f"rank{'s' if len(s.ranks) > 1 else ''} {','.join(map(str, s.ranks))}: {s.op}"
        + (f" {list(s.sizes[0])}" if d.what == "sizes" and s.sizes else "")
        + (f" {s.dtypes[0]}" if d.what == "dtype" and s.dtypes else "")
        + (f" {s.state}" if d.what == "state" and s.state else "")
        + (f" ({s.detail})" if s.detail else "")
        + (f" at {s.site}" if s.site else "") for s in d.sides)
    return f"first disagreement at #{d.seq} ({d.what}): {sides}"


def tables(snap: Snapshot) -> list[CommTable]:
    """Every communicator of every node's evidence."""
    several = len(snap.collectives) > 1
    out = []
    for item in snap.collectives:
        for comm in item.communicators:
            name = f" {comm.name}" if comm.name else ""
            kind = "communicator" if comm.source == ev.SOURCE_RAS else "process group"
            bits = [f"{kind} {comm.id}{name} ({SOURCE_NAME.get(comm.source, comm.source)})"]
            if several and item.host:
                bits.append(f"read on {item.host}")
            if comm.size is not None:
                bits.append(f"{comm.size} ranks")
            elif comm.members:
                bits.append(f"{len(comm.members)} ranks")
            state = " ".join(x for x in (comm.status, comm.errors) if x)
            if state:
                bits.append(state)
            rows = tuple((str(p.rank), _cell(p.global_rank), _cell(p.pid), _cell(p.gpu),
                          _cell(p.host), position(p), _cell(p.status))
                         for p in comm.positions)
            missing = tuple(
                f"rank {m.rank}" + (f" (global {m.global_rank})" if m.global_rank is not None
                                    and m.global_rank != m.rank else "")
                + (f", PID {m.pid}" if m.pid else "") + (f", GPU {m.gpu}" if m.gpu is not None
                                                         else "")
                + (f" on {m.host}" if m.host else "") + f": {m.reason or 'no data'}"
                for m in comm.missing)
            out.append(CommTable(" · ".join(bits), rows, missing,
                                 _disagreement(comm.disagreement) if comm.disagreement
                                 else None))
    return out


def none_lines(snap: Snapshot) -> list[str]:
    """The one line per node that had no collective evidence: what is missing, what to set."""
    return [item.missing_evidence for item in snap.collectives
            if not item.communicators and item.missing_evidence]


def by_pid(snap: Snapshot) -> dict[int, str]:
    """Each rank process's collective position, for a table column (first communicator wins:
    RAS's counts come before the Flight Recorder's sequence ids)."""
    out: dict[int, str] = {}
    for item in snap.collectives:
        for comm in item.communicators:
            for p in comm.positions:
                if p.pid is not None and p.pid not in out:
                    out[p.pid] = position(p)
    return out


def view(snap: Snapshot) -> RenderableType | None:
    """The Rich section body; None when the snapshot carries no collective evidence at all."""
    found, none = tables(snap), none_lines(snap)
    if not found and not none:
        return None
    parts: list[RenderableType] = []
    for comm in found:
        parts.append(Text(comm.title, style="bold"))
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name in HEADER:
            table.add_column(name, justify="right" if name in ("comm rank", "rank", "pid")
                             else "left")
        for row in comm.rows:
            table.add_row(*row)
        parts.append(table)
        for line in comm.missing:
            parts.append(Text(f"  missing: {line}", style="bold red"))
        if comm.disagreement:
            parts.append(Text(f"  {comm.disagreement}", style="bold red"))
        parts.append(Text(""))
    for line in none:
        parts.append(Text(line, style="dim"))
    if none:
        parts.append(Text(""))
    return RichGroup(*parts)


def markdown(snap: Snapshot) -> list[str]:
    """The section as Markdown lines (empty when there is no collective evidence at all)."""
    found, none = tables(snap), none_lines(snap)
    if not found and not none:
        return []
    out = ["### Collectives", ""]
    for comm in found:
        out += [f"**{comm.title}**", "", "| " + " | ".join(HEADER) + " |",
                "|---:|---:|---:|---|---|---|---|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in comm.rows]
        out.append("")
        out += [f"- missing: {line}" for line in comm.missing]
        if comm.disagreement:
            out.append(f"- {comm.disagreement}")
        out.append("")
    out += [f"_{line}_" for line in none]
    if none:
        out.append("")
    return out
