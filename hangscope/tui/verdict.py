"""The verdict banner: the diagnosis, coloured by severity, with the suspects named."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from hangscope.model import Severity, Snapshot
from hangscope.render.text import SEVERITY_MARK, SEVERITY_STYLE
from hangscope.words import who

_CLASSES = ("-critical", "-warning", "-info", "-exited", "-none")


def suspects_text(snap: Snapshot) -> str:
    """Who the verdict's suspects are, by name and PID (and node, over several)."""
    if snap.verdict is None:
        return ""
    found = snap.suspect_processes
    several = len(snap.host_names) > 1
    names = [who(p) + (f" on {p.host}" if several and p.host else "") for p in found]
    seen = {p.pid for p in found}
    names += [f"PID {pid}" for pid in snap.verdict.suspects if pid not in seen]
    return ", ".join(names)


def banner_text(snap: Snapshot | None, exited: bool = False, error: str | None = None,
                target: int | None = None, evidence: int = 0) -> Text:
    """The banner: job gone or sampling failed, then the verdict and up to ``evidence`` lines."""
    text = Text()
    if exited:
        text.append("✖ JOB EXITED", style="bold red")
        if snap is None:
            text.append(f": PID {target} and its job are gone; there is nothing to show.",
                        style="bold")
            return text
        text.append(": none of its processes is left; this is the last snapshot "
                    f"({snap.created[11:19]}).\n", style="bold")
    if error:
        text.append("⚠ Last sample failed: ", style="bold yellow")
        text.append(error + "\n")
    if snap is None:
        text.append(f"Taking the first sample of PID {target}…" if target else "No snapshot.",
                    style="dim")
        return text
    verdict = snap.verdict
    if verdict is None:
        text.append("No verdict.", style="dim")
        return text
    style = SEVERITY_STYLE[verdict.severity]
    text.append(f"{SEVERITY_MARK[verdict.severity]} ", style=style)
    text.append(verdict.kind.value.replace("_", " ").upper(), style=style)
    suspects = suspects_text(snap)
    if suspects:
        text.append(f" · suspect{'s' if len(verdict.suspects) > 1 else ''}: ", style="bold")
        text.append(suspects, style="bold red" if verdict.severity is Severity.CRITICAL
                    else "bold")
    text.append("\n")
    text.append(verdict.summary)
    for line in verdict.evidence[:evidence]:
        text.append(f"\n  · {line}", style="dim")
    return text


class VerdictBanner(Widget):
    """Banner under the header; its CSS class follows the verdict's severity."""

    snapshot: reactive[Snapshot | None] = reactive(None, always_update=True, layout=True)
    exited: reactive[bool] = reactive(False, layout=True)
    error: reactive[str | None] = reactive(None, layout=True)
    evidence: reactive[int] = reactive(0, layout=True)  # lines of evidence: on tall screens

    def __init__(self, target: int | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.target = target

    def _restyle(self) -> None:
        snap = self.snapshot
        if self.exited:
            wanted = "-exited"
        elif snap is None or snap.verdict is None:
            wanted = "-none"
        else:
            wanted = f"-{snap.verdict.severity.value}"
        for name in _CLASSES:
            self.set_class(name == wanted, name)

    def watch_snapshot(self) -> None:
        self._restyle()

    def watch_exited(self) -> None:
        self._restyle()

    def render(self) -> Text:
        return banner_text(self.snapshot, self.exited, self.error, self.target, self.evidence)
