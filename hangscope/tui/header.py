"""The top line: what job this is, how many ranks, how fresh the sample is, and sampling state."""

from __future__ import annotations

from enum import Enum

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from hangscope.model import Snapshot
from hangscope.words import duration_cell


class LiveState(str, Enum):
    """What the sampling side of the app is doing."""

    STARTING = "starting"  # no Snapshot yet
    SAMPLING = "sampling"
    WATCHING = "watching"  # idle between samples
    PAUSED = "paused"
    EXITED = "target exited"
    OFFLINE = "offline"

    def __str__(self) -> str:
        return self.value


_STATE_STYLE = {
    LiveState.STARTING: ("◌", "yellow"), LiveState.SAMPLING: ("●", "bold green"),
    LiveState.WATCHING: ("○", "green"), LiveState.PAUSED: ("⏸", "bold yellow"),
    LiveState.EXITED: ("✖", "bold red"), LiveState.OFFLINE: ("□", "cyan"),
}


def header_text(snap: Snapshot | None, state: LiveState, age: float | None,
                target: int | None = None) -> Text:
    """``python job · launcher 7698 · vm · ranks 4/4 · sampled 3s ago · ● sampling``."""
    text = Text()
    if snap is None:
        text.append("hangscope", style="bold")
        text.append(f" · attaching to PID {target}" if target else "")
    else:
        job = snap.job
        text.append(f"{job.kind} job", style="bold cyan")
        if job.launcher:
            text.append(f" · launcher {job.launcher}")
        elif job.target:
            text.append(f" · PID {job.target}")
        if snap.hosts:
            text.append(f" · {snap.hosts[0].name}")
        ranks = snap.rank_processes
        alive = [p for p in ranks if not p.is_exited]
        if ranks or job.expected_ranks:
            expected = job.expected_ranks
            short = expected is not None and len(alive) < expected
            text.append(" · ranks ")
            text.append(f"{len(alive)}/{expected}" if expected is not None else f"{len(alive)}",
                        style="bold red" if short else "green")
            if len(ranks) > len(alive):
                text.append(f" ({len(ranks) - len(alive)} exited)", style="bold red")
        else:
            count = len(snap.processes)
            text.append(f" · {count} process{'es' if count != 1 else ''}")
        if state is LiveState.OFFLINE:
            text.append(f" · dump of {snap.created[:16].replace('T', ' ')}")
        elif age is not None:
            text.append(f" · sampled {duration_cell(age)} ago")
    mark, style = _STATE_STYLE[state]
    text.append(" · ")
    text.append(f"{mark} {state}", style=style)
    return text


class JobHeader(Widget):
    """One or two lines at the top of the screen."""

    # layout=True: the header is one or two lines, depending on what it says.
    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True, layout=True)
    state: reactive[LiveState] = reactive(LiveState.STARTING, layout=True)
    age: reactive[float | None] = reactive(None, layout=True)

    def __init__(self, target: int | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.target = target

    def render(self) -> Text:
        return header_text(self.snapshot, self.state, self.age, self.target)
