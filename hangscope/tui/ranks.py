"""The rank table: one row per process of the job, the suspects in red, a filter on top.

Rows are keyed by (host, PID): over several nodes (``attach --nodes``) PIDs repeat, and a
``node`` column shows whose each row is.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

from hangscope.model import Process, ProcessKey, Role, Snapshot, key_in, signature_of
from hangscope.render import collectives
from hangscope.render.text import CATEGORY_STYLE, gpu_cell
from hangscope.words import at_least, fit_site, rank_label

_ROLE_SHORT = {Role.RESOURCE_TRACKER: "res.track", Role.COMPILE_WORKER: "compile",
               Role.ENGINE_CORE: "engine", Role.DETOKENIZER: "detok"}


@dataclass(frozen=True)
class RankFilter:
    """Which rows to show: a group's processes, one node's, or those whose category, op,
    site, name, PID or node has the text."""

    label: str
    keys: frozenset[ProcessKey] | None = None  # (host, PID); host None: the PID on any host
    text: str | None = None
    host: str | None = None

    @property
    def everything(self) -> bool:
        return self.keys is None and self.host is None and not self.text

    def matches(self, proc: Process) -> bool:
        if self.host is not None and proc.host != self.host:
            return False
        if self.keys is not None:
            return key_in(proc.key, self.keys)
        if not self.text:
            return True
        signature = signature_of(proc)[0]
        haystack = f"{signature} {proc.role} {proc.name} {proc.pid} {proc.host or ''}".lower()
        return all(word in haystack for word in self.text.lower().split())


def row_id(key: ProcessKey) -> str:
    """The table's row key of a process: ``14@node03`` (``14`` where the host is unknown)."""
    host, pid = key
    return f"{pid}@{host}" if host is not None else str(pid)


def key_of_row(row: str) -> ProcessKey:
    """The (host, PID) of a row key written by :func:`row_id`."""
    pid, _, host = row.partition("@")
    return (host or None, int(pid))


def table_columns(snap: Snapshot) -> tuple[str, ...]:
    """The table's columns; ``gpu`` only when some process is known to use a GPU, ``node``
    when the processes come from several hosts."""
    gpu = any(p.gpus for p in snap.processes)
    coll = ("coll",) if positions(snap) else ()  # NCCL RAS / Flight Recorder evidence
    node = ("node",) if len(snap.host_names) > 1 else ()
    return ("rank", *node, "role", "pid", "st", "cpu%", *(("gpu",) if gpu else ()), "category",
            "op", *coll, "same", "site")


_POSITIONS: list[tuple[Snapshot, dict[ProcessKey, str], dict[int, str]]] = []


def positions(snap: Snapshot) -> dict[ProcessKey, str]:
    """Each rank's collective position (render/collectives.py) by (host, PID) of the node
    that read it, computed once per snapshot (first communicator wins, as in the report)."""
    return _positions(snap)[0]


def _positions(snap: Snapshot) -> tuple[dict[ProcessKey, str], dict[int, str]]:
    if not _POSITIONS or _POSITIONS[0][0] is not snap:
        by_key: dict[ProcessKey, str] = {}
        for item in snap.collectives:
            for comm in item.communicators:
                for pos in comm.positions:
                    if pos.pid is not None:
                        by_key.setdefault((item.host, pos.pid), collectives.position(pos))
        # On one host, by PID alone too: a reader may spell the host differently.
        by_pid = collectives.by_pid(snap) if len(snap.host_names) <= 1 else {}
        _POSITIONS[:] = [(snap, by_key, by_pid)]
    return _POSITIONS[0][1], _POSITIONS[0][2]


def position_of(proc: Process, snap: Snapshot) -> str:
    """The collective position of a process, as read on its host."""
    by_key, by_pid = _positions(snap)
    return by_key.get(proc.key) or by_key.get((None, proc.pid)) or by_pid.get(proc.pid) or "-"


def row_cells(proc: Process, snap: Snapshot, stuck_for: dict[ProcessKey, float | None],
              columns: tuple[str, ...]) -> list[Text]:
    """The cells of one process's row, in ``columns`` order."""
    gone = proc.is_exited
    suspect = snap.verdict is not None and snap.verdict.is_suspect(proc)
    base = "bold red" if suspect else ("dim" if gone else "")
    working = proc.working_thread
    category = proc.category
    if gone:
        stuck = "exited"
    elif proc.key in stuck_for:
        stuck = at_least(stuck_for[proc.key])
    else:
        stuck = "-"
    values = {
        "rank": rank_label(proc.rank),
        "node": proc.host or "?",
        "role": _ROLE_SHORT.get(proc.role, str(proc.role)),
        "pid": str(proc.pid),
        "st": "X" if proc.is_gone else (proc.state or "?"),
        "cpu%": f"{proc.cpu_percent:.0f}" if proc.cpu_percent is not None else "-",
        "gpu": gpu_cell(proc, snap, memory=False, sep=":"),
        "category": str(category),
        "op": (working.op if working and not gone else None) or "-",
        "coll": position_of(proc, snap),
        "same": stuck,
        "site": (working.site if working else None) or (proc.errors[0] if proc.errors else "-"),
    }
    cells = []
    for name in columns:
        style = base
        if name == "category" and not base:
            style = CATEGORY_STYLE.get(category, "")
        justify = "right" if name in ("rank", "pid", "cpu%", "same") else "left"
        cells.append(Text(values[name], style=style, justify=justify))  # type: ignore[arg-type]
    return cells


class RankTable(DataTable):
    """Rows keyed by (host, PID) (:func:`row_id`); the cursor row is the selected rank."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self.stuck_for: dict[ProcessKey, float | None] = {}
        self.rank_filter: RankFilter | None = None
        self._columns: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self._keys: list[ProcessKey] = []

    def visible(self, snap: Snapshot) -> list[Process]:
        procs = list(snap.processes)
        if self.rank_filter is not None:
            procs = [p for p in procs if self.rank_filter.matches(p)]
        return procs

    @property
    def shown_keys(self) -> list[ProcessKey]:
        """(host, PID) of every row, top to bottom."""
        return list(self._keys)

    @property
    def selected_key(self) -> ProcessKey | None:
        """(host, PID) of the cursor row."""
        if not self._keys or not 0 <= self.cursor_row < len(self._keys):
            return None
        return self._keys[self.cursor_row]

    @property
    def selected_pid(self) -> int | None:
        key = self.selected_key
        return key[1] if key is not None else None

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

    def redraw(self, select: ProcessKey | None = None) -> None:
        """Update the rows in place, or rebuild them when processes or widths changed."""
        snap = self.snapshot
        if snap is None:
            return
        keep = select if select is not None else self.selected_key
        columns = table_columns(snap)
        procs = self.visible(snap)
        keys = [p.key for p in procs]
        rows = [row_cells(p, snap, self.stuck_for, columns) for p in procs]
        widths = self._widths(columns, rows)
        for row in rows:
            row[-1].plain = fit_site(row[-1].plain, widths[-1])
        layout = (columns, widths)
        if layout == self._columns and keys == self._keys:
            for key, cells in zip(keys, rows, strict=True):
                for name, cell in zip(columns, cells, strict=True):
                    self.update_cell(row_id(key), name, cell)
        else:
            self.clear(columns=True)
            # Explicit widths: the table then never re-measures (or mis-measures) its cells.
            for name, width in zip(columns, widths, strict=True):
                self.add_column(name, key=name, width=width)
            self._columns = layout
            for key, cells in zip(keys, rows, strict=True):
                self.add_row(*cells, key=row_id(key))
            self._keys = keys
        if keep in keys:
            self.move_cursor(row=keys.index(keep))
