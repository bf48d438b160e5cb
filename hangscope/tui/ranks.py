"""The rank table: one row per process of the job, the suspects in red, a filter on top."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

from hangscope.model import Process, Role, Snapshot, signature_of
from hangscope.render import collectives
from hangscope.render.text import CATEGORY_STYLE, gpu_cell
from hangscope.words import duration_cell

_ROLE_SHORT = {Role.RESOURCE_TRACKER: "res.track", Role.COMPILE_WORKER: "compile",
               Role.ENGINE_CORE: "engine", Role.DETOKENIZER: "detok"}


@dataclass(frozen=True)
class RankFilter:
    """Which rows to show: a group's processes, or those whose category/op/site has the text."""

    label: str
    pids: frozenset[int] | None = None
    text: str | None = None

    def matches(self, proc: Process) -> bool:
        if self.pids is not None:
            return proc.pid in self.pids
        if not self.text:
            return True
        signature = signature_of(proc)[0]
        haystack = f"{signature} {proc.role} {proc.name} {proc.pid}".lower()
        return all(word in haystack for word in self.text.lower().split())


_SITE = re.compile(r"^(?:[\w<>.]*\.)?([\w<>]+) \([^()]*?:(\d+)\)$")


def fit_site(site: str, width: int) -> str:
    """A call site cut to ``width``, keeping what still says something: the function name and
    line (``ModelRunner.init_memory_pool (sglang_like.py:97)`` -> ``init_memory_pool:97``, then
    ``init_memo…:97``)."""
    if len(site) <= width:
        return site
    match = _SITE.match(site)
    if match is None:
        return site[: max(0, width - 1)] + "…"
    func, line = match.group(1), f":{match.group(2)}"
    if len(func) + len(line) <= width:
        return func + line
    keep = width - len(line) - 1
    return func[:keep] + "…" + line if keep >= 3 else (func + line)[: max(0, width - 1)] + "…"


def table_columns(snap: Snapshot) -> tuple[str, ...]:
    """The table's columns; ``gpu`` only when some process is known to use a GPU."""
    gpu = any(p.gpus for p in snap.processes)
    coll = ("coll",) if positions(snap) else ()  # NCCL RAS / Flight Recorder evidence
    return ("rank", "role", "pid", "st", "cpu%", *(("gpu",) if gpu else ()), "category", "op",
            *coll, "stuck", "site")


_POSITIONS: list[tuple[Snapshot, dict[int, str]]] = []


def positions(snap: Snapshot) -> dict[int, str]:
    """Each rank's collective position (render/collectives.py), computed once per snapshot."""
    if not _POSITIONS or _POSITIONS[0][0] is not snap:
        _POSITIONS[:] = [(snap, collectives.by_pid(snap))]
    return _POSITIONS[0][1]


def row_cells(proc: Process, snap: Snapshot, stuck_for: dict[int, float | None],
              columns: tuple[str, ...]) -> list[Text]:
    """The cells of one process's row, in ``columns`` order."""
    suspects = set(snap.verdict.suspects) if snap.verdict else set()
    gone = proc.is_exited
    base = "bold red" if proc.pid in suspects else ("dim" if gone else "")
    working = proc.working_thread
    category = proc.category
    if gone:
        stuck = "exited"
    elif proc.pid in stuck_for:
        stuck = duration_cell(stuck_for[proc.pid])
    else:
        stuck = "-"
    values = {
        "rank": proc.rank.label if proc.rank is not None else "-",
        "role": _ROLE_SHORT.get(proc.role, str(proc.role)),
        "pid": str(proc.pid),
        "st": "X" if proc.is_gone else (proc.state or "?"),
        "cpu%": f"{proc.cpu_percent:.0f}" if proc.cpu_percent is not None else "-",
        "gpu": gpu_cell(proc, snap, memory=False, sep=":"),
        "category": str(category),
        "op": (working.op if working and not gone else None) or "-",
        "coll": positions(snap).get(proc.pid, "-"),
        "stuck": stuck,
        "site": (working.site if working else None) or (proc.errors[0] if proc.errors else "-"),
    }
    cells = []
    for name in columns:
        style = base
        if name == "category" and not base:
            style = CATEGORY_STYLE.get(category, "")
        justify = "right" if name in ("rank", "pid", "cpu%", "stuck") else "left"
        cells.append(Text(values[name], style=style, justify=justify))  # type: ignore[arg-type]
    return cells


class RankTable(DataTable):
    """Rows keyed by PID; the cursor row is the selected rank."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self.stuck_for: dict[int, float | None] = {}
        self.rank_filter: RankFilter | None = None
        self._columns: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self._pids: list[int] = []

    def visible(self, snap: Snapshot) -> list[Process]:
        procs = list(snap.processes)
        if self.rank_filter is not None:
            procs = [p for p in procs if self.rank_filter.matches(p)]
        return procs

    @property
    def selected_pid(self) -> int | None:
        if not self._pids or not 0 <= self.cursor_row < len(self._pids):
            return None
        return self._pids[self.cursor_row]

    def watch_snapshot(self) -> None:
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def _widths(self, columns: tuple[str, ...], rows: list[list[Text]]) -> tuple[int, ...]:
        """Each column's width; the last (site) gets what is left on screen, so no sideways
        scrolling at 80 columns (it is cut with an ellipsis instead)."""
        widths = [max([len(name), *(r[i].cell_len for r in rows)])
                  for i, name in enumerate(columns)]
        if self.size.width:
            used = sum(widths[:-1]) + 2 * self.cell_padding * len(columns)
            scrollbar = 2 if len(rows) + 1 > self.size.height else 0
            room = self.size.width - used - scrollbar
            if room >= 12:
                widths[-1] = min(widths[-1], room)
        return tuple(widths)

    def redraw(self, select: int | None = None) -> None:
        """Update the rows in place, or rebuild them when processes or widths changed."""
        snap = self.snapshot
        if snap is None:
            return
        keep = select if select is not None else self.selected_pid
        columns = table_columns(snap)
        procs = self.visible(snap)
        pids = [p.pid for p in procs]
        rows = [row_cells(p, snap, self.stuck_for, columns) for p in procs]
        widths = self._widths(columns, rows)
        for row in rows:
            row[-1].plain = fit_site(row[-1].plain, widths[-1])
        layout = (columns, widths)
        if layout == self._columns and pids == self._pids:
            for pid, cells in zip(pids, rows, strict=True):
                for name, cell in zip(columns, cells, strict=True):
                    self.update_cell(str(pid), name, cell)
        else:
            self.clear(columns=True)
            # Explicit widths: the table then never re-measures (or mis-measures) its cells.
            for name, width in zip(columns, widths, strict=True):
                self.add_column(name, key=name, width=width)
            self._columns = layout
            for pid, cells in zip(pids, rows, strict=True):
                self.add_row(*cells, key=str(pid))
            self._pids = pids
        if keep in pids:
            self.move_cursor(row=pids.index(keep))
