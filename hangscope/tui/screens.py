"""Modal screens: key help, the rank filter, and picking the rank to diff against."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from hangscope.model import Process, ProcessKey, Snapshot, signature_of
from hangscope.render.fold import pid_host
from hangscope.tui.keys import KEYS, LEGEND
from hangscope.tui.ranks import RankFilter
from hangscope.words import group_names


class HelpScreen(ModalScreen[None]):
    """The key bindings."""

    BINDINGS = [Binding("escape,q,question_mark,enter,h,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in KEYS:
            table.add_row(key, what)
        # Scrolls (up/down, PgUp/PgDn, Home/End): at 80x24 the keys and the legend do not fit.
        with VerticalScroll(id="help-box", classes="modal-box"):
            yield Static(Text("hangscope attach: keys", style="bold"))
            yield Static(table)
            legend = Table(box=None, show_header=False, pad_edge=False)
            legend.add_column(style="bold", no_wrap=True)
            legend.add_column()
            for mark, what in LEGEND:
                legend.add_row(mark, what)
            yield Static(Text("In the rank table:", style="bold"))
            yield Static(legend)
            yield Static(Text("Sampling runs in the background; the target is only read, "
                              "never signalled. Esc closes this.", style="dim"))

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)


def filter_choices(snap: Snapshot) -> list[RankFilter]:
    """The groups of the snapshot, then each node (over several), then each category present,
    then "all"."""
    is_rank = any(p.rank is not None for p in snap.processes)
    choices = [RankFilter(label=f"{group_names(g, is_rank)}: {g.signature}",
                          keys=g.keys) for g in snap.groups]
    hosts = snap.host_names
    if len(hosts) > 1:
        count = {h: 0 for h in hosts}
        for proc in snap.processes:
            if proc.host in count:
                count[proc.host] += 1
        choices += [RankFilter(label=f"node {h} ({count[h]} processes)", host=h)
                    for h in hosts]
    seen: list[str] = []
    for proc in snap.processes:
        category = str(proc.category)
        if category not in seen:
            seen.append(category)
    choices += [RankFilter(label=f"category {c}", text=c) for c in seen]
    choices.append(RankFilter(label="all processes"))
    return choices


class FilterScreen(ModalScreen[RankFilter | None]):
    """Type a category, op or text, or pick a group; Enter applies, Esc cancels.

    The text box keeps the focus; ↑/↓ move through the suggestions under it (like a command
    palette), so keys typed fast, before any focus change could land, still do what they say.
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "move(1)", show=False),
        Binding("up", "move(-1)", show=False),
    ]

    def __init__(self, snap: Snapshot, current: RankFilter | None = None) -> None:
        super().__init__()
        self.choices = filter_choices(snap)
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-box", classes="modal-box"):
            yield Static(Text("Filter ranks: type text and Enter, or ↓ to pick a group",
                              style="bold"))
            yield Input(value=(self.current.text or "") if self.current else "",
                        placeholder="category, op, site or text (empty: all)", id="filter-input")
            options = OptionList(*[Option(c.label, id=str(i))
                                   for i, c in enumerate(self.choices)], id="filter-choices")
            options.can_focus = False
            yield options

    def on_mount(self) -> None:
        self.query_one("#filter-choices", OptionList).highlighted = None

    def on_input_changed(self, event: Input.Changed) -> None:
        words = event.value.lower().split()
        options = self.query_one("#filter-choices", OptionList)
        options.clear_options()
        options.add_options([Option(c.label, id=str(i)) for i, c in enumerate(self.choices)
                             if all(w in c.label.lower() for w in words)])
        options.highlighted = None

    def action_move(self, step: int) -> None:
        """Move through the suggestions; above the first one is the typed text again."""
        options = self.query_one("#filter-choices", OptionList)
        if not options.option_count:
            return
        current = options.highlighted
        if current is None:
            wanted: int | None = 0 if step > 0 else None
        else:
            wanted = current + step
            if wanted < 0:
                wanted = None
            wanted = min(wanted, options.option_count - 1) if wanted is not None else None
        options.highlighted = wanted

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one("#filter-choices", OptionList)
        if options.highlighted is not None:
            option = options.get_option_at_index(options.highlighted)
            assert option.id is not None
            self.dismiss(self.choices[int(option.id)])
            return
        text = event.value.strip()
        self.dismiss(RankFilter(label=f'"{text}"', text=text) if text
                     else RankFilter(label="all processes"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        assert event.option.id is not None  # a click on a suggestion
        self.dismiss(self.choices[int(event.option.id)])

    def action_cancel(self) -> None:
        self.dismiss(None)


def _counterpart(snap: Snapshot, selected: Process, candidates: list[Process]) -> int:
    """Index of the rank most worth comparing with: the first in a different group."""
    mine = signature_of(selected)[0]
    verdict = snap.verdict

    def suspect(proc: Process) -> bool:
        return verdict is not None and verdict.is_suspect(proc)

    ranked = sorted(range(len(candidates)), key=lambda i: (
        signature_of(candidates[i])[0] == mine,
        suspect(candidates[i]) == suspect(selected),
        candidates[i].is_exited,
    ))
    return ranked[0] if ranked else 0


class _StopAtEnds(OptionList):
    """An option list whose cursor stops at the first and last entry (as htop's and a
    pager's do): wrapping from the last rank to the first reads as a jump in the list."""

    def action_cursor_down(self) -> None:
        if self.highlighted is None or self.highlighted < self.option_count - 1:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.highlighted is None or self.highlighted > 0:
            super().action_cursor_up()


class DiffPickScreen(ModalScreen[ProcessKey | None]):
    """Pick the rank whose working stack to compare with the selected one; answers its
    (host, PID)."""

    # enter here too: a fast "d, enter" can arrive before the list has taken the focus.
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("enter", "pick", show=False)]

    def __init__(self, snap: Snapshot, selected: Process) -> None:
        super().__init__()
        self.selected = selected
        self.candidates = [p for p in (snap.ranks or snap.processes)
                           if p.key != selected.key and p.working_thread is not None]
        if not self.candidates:
            self.candidates = [p for p in snap.processes
                               if p.key != selected.key and p.working_thread is not None]
        self.default = _counterpart(snap, selected, self.candidates)
        self.several = len(snap.host_names) > 1  # PIDs repeat: name the node

    def compose(self) -> ComposeResult:
        with Vertical(id="diff-box", classes="modal-box"):
            yield Static(Text(f"Diff {self.selected.name} "
                              f"({pid_host(self.selected, self.several)}) with:",
                              style="bold"))
            options = [Option(Text.assemble((f"{p.name:<8} ", "bold"),
                                            f"{pid_host(p, self.several)}  ",
                                            (signature_of(p)[0], "dim"), no_wrap=True,
                                            overflow="ellipsis"), id=str(i))
                       for i, p in enumerate(self.candidates)]
            yield _StopAtEnds(*options, id="diff-choices")

    def on_mount(self) -> None:
        options = self.query_one("#diff-choices", OptionList)
        if self.candidates:
            options.highlighted = self.default
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        assert event.option.id is not None
        self.dismiss(self.candidates[int(event.option.id)].key)

    def action_pick(self) -> None:
        options = self.query_one("#diff-choices", OptionList)
        index = options.highlighted if options.highlighted is not None else self.default
        if self.candidates:
            self.dismiss(self.candidates[index].key)

    def action_cancel(self) -> None:
        self.dismiss(None)
