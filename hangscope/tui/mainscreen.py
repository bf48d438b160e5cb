"""The one main screen: header, verdict, rank table, and tabs for stack, tree, diff, findings."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from hangscope.model import Process, ProcessKey, Snapshot
from hangscope.tui.calltree import CallTree
from hangscope.tui.collectives import CollectivesScreen
from hangscope.tui.diffview import DiffView
from hangscope.tui.findings import FindingsView
from hangscope.tui.header import JobHeader, LiveState
from hangscope.tui.ranks import RankFilter, RankTable, key_of_row
from hangscope.tui.screens import DiffPickScreen, FilterScreen, HelpScreen
from hangscope.tui.stackview import StackPane
from hangscope.tui.verdict import VerdictBanner

TABS = ("tab-stack", "tab-tree", "tab-diff", "tab-findings")


def default_key(snap: Snapshot) -> ProcessKey | None:
    """The rank to show first: the first suspect, else the first rank, else the first process."""
    for proc in (*snap.suspect_processes, *snap.ranks, *snap.processes):
        return proc.key
    return None


class MainScreen(Screen[None]):
    """Renders the latest Snapshot; the app feeds it through ``show_snapshot``."""

    BINDINGS = [
        # priority: the call tree binds space to "toggle node"; here it always pauses.
        Binding("space", "app.toggle_pause", "Pause", priority=True),
        Binding("r", "app.sample_now", "Sample"),
        Binding("n", "toggle_native", "Native"),
        Binding("p", "toggle_paths", "Paths", show=False),
        Binding("d", "diff", "Diff"),
        Binding("a", "all_common", "All frames", show=False),
        Binding("c", "collectives", "Collectives", show=False),
        Binding("k", "app.kernels", "Kernels", show=False),
        Binding("s", "app.save", "Save"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("h,f1", "help", "Help", show=False),
        # j/k as in less and vim: for whatever has the focus (table, thread list, stack)
        Binding("j", "cursor('down')", show=False),
        Binding("k", "cursor('up')", show=False),
        Binding("q", "app.quit", "Quit"),
        Binding("ctrl+c", "app.quit", "Quit", show=False, priority=True),
        *(Binding(str(i + 1), f"show_tab('{tab}')", show=False) for i, tab in enumerate(TABS)),
    ]

    def __init__(self, target: int | None = None) -> None:
        super().__init__()
        self.target = target
        self.snapshot: Snapshot | None = None
        self.native = True
        self.full_paths = False
        self.rank_filter: RankFilter | None = None
        self._suspects: frozenset[ProcessKey] = frozenset()

    def compose(self) -> ComposeResult:
        yield JobHeader(self.target, id="header")
        yield VerdictBanner(self.target, id="verdict")
        yield Static(id="filter-note")
        yield RankTable(id="ranks")
        with TabbedContent(id="tabs"):
            with TabPane("1 Stack", id="tab-stack"):
                yield StackPane(id="stack-pane")
            with TabPane("2 Tree", id="tab-tree"):
                yield CallTree(id="calltree")
            with TabPane("3 Diff", id="tab-diff"):
                yield DiffView(id="diff")
            with TabPane("4 Findings", id="tab-findings"):
                yield FindingsView(id="findings")
        yield Footer(compact=True)

    # -- fed by the app ------------------------------------------------------------------
    def show_snapshot(self, snap: Snapshot, stuck_for: dict[ProcessKey, float | None]) -> None:
        suspects = snap.verdict.suspect_keys if snap.verdict is not None else frozenset()
        # A new diagnosis moves the selection to its suspect; otherwise the user's choice stays.
        follow = self.snapshot is None or suspects != self._suspects
        self._suspects = suspects
        self.snapshot = snap
        self.query_one(JobHeader).snapshot = snap
        self.query_one(VerdictBanner).snapshot = snap
        table = self.query_one(RankTable)
        table.stuck_for = stuck_for
        table.snapshot = snap
        stack = self.query_one(StackPane)
        stack.snapshot = snap
        if follow:
            table.redraw(select=default_key(snap))
            stack.select(table.selected_key)
        self.query_one(CallTree).snapshot = snap
        self.query_one(DiffView).snapshot = snap
        self.query_one(FindingsView).snapshot = snap
        self._filter_note()

    def show_state(self, state: LiveState, age: float | None, exited: bool,
                   error: str | None) -> None:
        header = self.query_one(JobHeader)
        header.state = state
        header.age = age
        banner = self.query_one(VerdictBanner)
        banner.exited = exited
        banner.error = error

    def on_resize(self, event: events.Resize) -> None:
        # Room to spare: the verdict's evidence goes in the banner too, not only in Findings.
        self.query_one(VerdictBanner).evidence = 4 if event.size.height >= 36 else 0

    # -- selection -----------------------------------------------------------------------
    @property
    def selected(self) -> Process | None:
        key = self.query_one(RankTable).selected_key
        if self.snapshot is None or key is None:
            return None
        return self.snapshot.find(key)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.query_one(StackPane).select(key_of_row(event.row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_show_tab("tab-stack")

    # -- actions -------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        tabs = self.query_one(TabbedContent)
        focused = self.focused
        if focused is not None and tabs in focused.ancestors:
            # Focus left inside the pane being hidden (the thread list, the stack) would bring
            # its tab straight back: TabbedContent shows the pane that holds the focus.
            self.query_one(RankTable).focus()
        tabs.active = tab

    def action_toggle_native(self) -> None:
        self.native = not self.native
        self._restack()
        self.notify(f"Native frames {'shown' if self.native else 'hidden'}.", timeout=2)

    def action_toggle_paths(self) -> None:
        self.full_paths = not self.full_paths
        self._restack()
        self.notify(f"{'Full' if self.full_paths else 'Short'} file paths.", timeout=2)

    def action_all_common(self) -> None:
        """The diff's shared frames: all of them, or the two nearest the fork again."""
        diff = self.query_one(DiffView)
        diff.all_common = not diff.all_common
        diff.redraw()

    def _restack(self) -> None:
        stack = self.query_one(StackPane)
        stack.native, stack.full_paths = self.native, self.full_paths
        stack.redraw()
        diff = self.query_one(DiffView)
        diff.native, diff.full_paths = self.native, self.full_paths
        diff.redraw()

    def action_diff(self) -> None:
        selected = self.selected
        if self.snapshot is None or selected is None:
            self.notify("Select a rank first.", severity="warning")
            return
        picker = DiffPickScreen(self.snapshot, selected)
        if not picker.candidates:
            self.notify("No other process with a stack to compare with.", severity="warning")
            return

        def chosen(other: ProcessKey | None) -> None:
            if other is None:
                return
            diff = self.query_one(DiffView)
            diff.pair = (selected.key, other)
            diff.redraw()
            self.action_show_tab("tab-diff")

        self.app.push_screen(picker, chosen)

    def action_filter(self) -> None:
        if self.snapshot is None:
            return

        def chosen(choice: RankFilter | None) -> None:
            if choice is not None:
                self.apply_filter(None if choice.everything else choice)

        self.app.push_screen(FilterScreen(self.snapshot, self.rank_filter), chosen)

    def apply_filter(self, rank_filter: RankFilter | None) -> None:
        self.rank_filter = rank_filter
        table = self.query_one(RankTable)
        table.rank_filter = rank_filter
        table.redraw()
        self._filter_note()
        self.query_one(StackPane).select(table.selected_key)

    def _filter_note(self) -> None:
        note = self.query_one("#filter-note", Static)
        note.display = self.rank_filter is not None
        if self.rank_filter is not None and self.snapshot is not None:
            shown = len(self.query_one(RankTable).visible(self.snapshot))
            note.update(Text.assemble(("filter: ", "bold"), self.rank_filter.label,
                                      (f"  ({shown} shown, esc clears)", "dim")))

    def action_clear_filter(self) -> None:
        if self.rank_filter is not None:
            self.apply_filter(None)

    def action_cursor(self, direction: str) -> None:
        """j/k: move the cursor of the focused widget, or scroll it where it has none."""
        widget = self.focused
        if widget is None:
            return
        action = (getattr(widget, f"action_cursor_{direction}", None)
                  or getattr(widget, f"action_scroll_{direction}", None))
        if action is not None:
            action()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_collectives(self) -> None:
        self.app.push_screen(CollectivesScreen(self.snapshot))


__all__ = ["MainScreen", "default_key"]
