"""Two ranks' working stacks side by side in one column: the common callers, then the fork."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from hangscope.model import Frame, ProcessKey, Snapshot
from hangscope.render.stack import display_lines
from hangscope.words import who

_ADDRESS = re.compile(r"^0x[0-9a-f]+$")
#: Common frames shown before the fork; the rest are summarised in one line.
COMMON_SHOWN = 2


def diff_key(frame: Frame) -> tuple[object, ...]:
    """What makes two frames the same: Python by file and line; native by symbol and library.

    Unsymbolised native frames compare by library only: their addresses differ between
    processes (ASLR) even when the code is the same.
    """
    if frame.native:
        name = "?" if _ADDRESS.match(frame.name) else frame.name
        return (True, name, frame.short_file)
    return (False, frame.name, frame.file, frame.line)


@dataclass(frozen=True)
class StackDiff:
    """Two stacks, outermost frame first: the shared callers, then what each does after."""

    common: tuple[Frame, ...]
    left: tuple[Frame, ...]
    right: tuple[Frame, ...]

    @property
    def identical(self) -> bool:
        return not self.left and not self.right


def diff_stacks(left: Sequence[Frame], right: Sequence[Frame], native: bool = True) -> StackDiff:
    """Split two innermost-first stacks at their first divergent frame, counted from the outside."""
    outer_left = [f for f in reversed(left) if native or not f.native]
    outer_right = [f for f in reversed(right) if native or not f.native]
    shared = 0
    for a, b in zip(outer_left, outer_right, strict=False):
        if diff_key(a) != diff_key(b):
            break
        shared += 1
    return StackDiff(tuple(outer_left[:shared]), tuple(outer_left[shared:]),
                     tuple(outer_right[shared:]))


def _frame_lines(frames: Sequence[Frame], native: bool, full_paths: bool) -> Text:
    """Frames outermost first, styled like the stack view (native frames dim)."""
    text = Text()
    lines = display_lines(list(reversed(frames)), native=native, full_paths=full_paths,
                          outermost_first=True)
    for line in lines:
        if line.folded:
            text.append(f"    {line.text}\n", style="dim italic")
        elif line.native:
            text.append(f"    {line.text} [{line.location}]\n", style="dim")
        else:
            text.append(f"    {line.text} ({line.location})\n")
    if not lines:
        text.append("    (the stack ends here)\n", style="dim")
    text.rstrip()
    return text


def _fork_line(frames: Sequence[Frame], full_paths: bool) -> Text:
    """The first divergent frame of one side, as one highlighted line."""
    if not frames:
        return Text("(the stack ends here)", style="dim")
    frame = frames[0]
    where = frame.file if full_paths and frame.file else frame.short_file or "?"
    if not frame.native and frame.line:
        where = f"{where}:{frame.line}"
    shown = f"{frame.name} [{where}]" if frame.native else f"{frame.name} ({where})"
    return Text(shown, style="bold reverse")


def diff_text(snap: Snapshot, left_key: ProcessKey, right_key: ProcessKey, native: bool = True,
              full_paths: bool = False, side_by_side: bool = False,
              all_common: bool = False) -> RenderableType:
    """The diff of two processes' working threads (by (host, PID)), the first divergent frame
    highlighted."""
    left, right = snap.find(left_key), snap.find(right_key)
    if left is None or right is None:
        return Text("One of the two processes is no longer in the snapshot.", style="dim")
    lt, rt = left.working_thread, right.working_thread
    head = Text()
    head.append(f"{who(left)}  vs  {who(right)}", style="bold")
    head.append("  (working threads)\n", style="dim")
    if lt is None or rt is None:
        missing = left if lt is None else right
        head.append(f"{who(missing)} has no stack to compare.", style="yellow")
        return head
    diff = diff_stacks(lt.frames, rt.frames, native=native)
    if diff.identical:
        head.append(f"The stacks are identical ({len(diff.common)} frames).", style="green")
        return head
    hidden = 0 if all_common else len(diff.common) - COMMON_SHOWN
    if diff.common:
        head.append(f"  {len(diff.common)} frames in common, outermost first", style="dim")
        # A count with no way to see what it counts is a dead end: say the key.
        head.append(f" ({hidden} not shown; a: show them):\n" if hidden > 0 else ":\n",
                    style="dim")
        head.append_text(_frame_lines(diff.common[max(0, hidden):], native, full_paths))
        head.append("\n")
    else:
        head.append("  No frame in common: they differ from the outermost frame.\n",
                    style="dim")
    head.append("  ── first divergent frame ──\n", style="bold yellow")
    width = max(len(left.name), len(right.name))
    for proc, frames in ((left, diff.left), (right, diff.right)):
        head.append(f"  {proc.name:<{width}} ", style="bold")
        head.append_text(_fork_line(frames, full_paths))
        head.append("\n")
    head.append("  ── then, inward ──", style="bold yellow")
    rests = [(proc, _frame_lines(frames[1:], native, full_paths))
             for proc, frames in ((left, diff.left), (right, diff.right))]
    if side_by_side:
        grid = Table.grid(expand=True, padding=(0, 2))
        grid.add_column(ratio=1)
        grid.add_column(ratio=1)
        grid.add_row(*(Text(f"  {who(proc)}:", style="bold") for proc, _ in rests))
        grid.add_row(*(rest for _, rest in rests))
        return Group(head, grid)
    body = Text()
    for proc, rest in rests:
        body.append(f"\n  {who(proc)}:\n", style="bold")
        body.append_text(rest)
    return Group(head, body)


class DiffView(VerticalScroll):
    """The diff of the selected rank against another, picked with ``d``."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.pair: tuple[ProcessKey, ProcessKey] | None = None  # (host, PID) of each side
        self.native = True
        self.full_paths = False
        self.all_common = False  # ``a``: every frame the two stacks share, not the last two

    def compose(self) -> ComposeResult:
        yield Static("Press d to compare the selected rank with another one.", id="diff-body")

    def watch_snapshot(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        body = self.query_one("#diff-body", Static)
        if self.snapshot is None or self.pair is None:
            body.update(Text("Press d to compare the selected rank with another one.",
                             style="dim"))
            return
        body.update(diff_text(self.snapshot, *self.pair, native=self.native,
                              full_paths=self.full_paths, side_by_side=self.size.width >= 120,
                              all_common=self.all_common))

    def on_resize(self) -> None:
        self.redraw()
