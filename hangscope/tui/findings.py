"""The findings list, then the verdict's evidence and the notes that apply to the whole job."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from hangscope.model import Snapshot
from hangscope.render.text import findings_table


def findings_view(snap: Snapshot) -> RenderableType:
    parts: list[RenderableType] = [Text("Findings", style="bold underline")]
    parts.append(findings_table(snap) if snap.findings else Text("None.", style="dim"))
    if snap.verdict is not None and snap.verdict.evidence:
        parts.append(Text(""))
        parts.append(Text("Evidence for the verdict", style="bold underline"))
        parts.extend(Text(f"· {line}") for line in snap.verdict.evidence)
    errors = [(p, e) for p in snap.processes for e in p.errors]
    if errors:
        parts.append(Text(""))
        parts.append(Text("Could not read everything", style="bold underline"))
        parts.extend(Text(f"· PID {p.pid} ({p.name}): {e}", style="yellow") for p, e in errors)
    for note in snap.notes:
        parts.append(Text(f"Note: {note}", style="dim"))
    return Group(*parts)


class FindingsView(VerticalScroll):
    """Scrollable findings."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True)

    def compose(self) -> ComposeResult:
        yield Static(Text("No snapshot yet.", style="dim"), id="findings-body")

    def watch_snapshot(self) -> None:
        if self.snapshot is not None:
            self.query_one("#findings-body", Static).update(findings_view(self.snapshot))
