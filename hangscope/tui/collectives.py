"""The collectives view (key ``c``): per communicator, each rank's position, missing ranks and
the first disagreement, from NCCL RAS and the Flight Recorder (render/collectives.py)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from hangscope.model import Snapshot
from hangscope.render import collectives

NONE = ("No collective evidence in this snapshot: it was taken before hangscope read NCCL RAS "
        "and the Flight Recorder, or not by a sampler (an older dump).")


class CollectivesScreen(ModalScreen[None]):
    """The per-communicator table of the snapshot on screen."""

    BINDINGS = [Binding("escape,q,c,enter", "dismiss", "Close")]
    DEFAULT_CSS = "#collectives-box { width: 100%; max-width: 140; }"

    def __init__(self, snap: Snapshot | None) -> None:
        super().__init__()
        self.snap = snap

    def compose(self) -> ComposeResult:
        body = collectives.view(self.snap) if self.snap is not None else None
        with VerticalScroll(id="collectives-box", classes="modal-box"):
            yield Static(Text("Collectives (NCCL RAS, Flight Recorder)", style="bold"))
            yield Static(body if body is not None else Text(NONE, style="dim"),
                         id="collectives-body")
            yield Static(Text("Esc closes this.", style="dim"))

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)
