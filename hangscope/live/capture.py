"""What a watch does with a capture: write it (JSON + Markdown, 0600) and run ``--on-hang``.

Shared by the one-node watch (live/watch.py) and the multi-node one (remote/multiwatch.py), so
both write the same files, print the same line and run the hook the same way.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from hangscope.model import Snapshot


@dataclass(frozen=True)
class Capture:
    """One capture written to disk."""

    json: Path
    markdown: Path
    snapshot: Snapshot
    reason: str


def write_capture(out: Path, snap: Snapshot, why: str, label: str, index: int) -> Capture:
    """``OUT/hangscope-HOST-LABEL-DATE-N.json`` and ``.md``, with why it was captured noted."""
    from hangscope.render.output import render, write_private

    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    host = snap.hosts[0].name if snap.hosts else "host"
    base = out / f"hangscope-{host}-{label}-{stamp}-{index}"
    snap = replace(snap, notes=(*snap.notes, f"Captured by hangscope watch: {why}."))
    json_path = write_private(base.with_suffix(".json"), render(snap, "json"))
    md_path = write_private(base.with_suffix(".md"), render(snap, "md"))
    return Capture(json_path, md_path, snap, why)


def hang_line(capture: Capture) -> str:
    """The terminal line of a capture: ``HANG (why): KIND: summary -> report.md``."""
    verdict = capture.snapshot.verdict
    kind = str(verdict.kind) if verdict is not None else "unknown"
    summary = verdict.summary if verdict is not None else "no verdict"
    return (f"HANG ({capture.reason}): {kind.upper().replace('_', ' ')}: {summary} "
            f"-> {capture.markdown}")


@dataclass
class Hooks:
    """``--on-hang CMD``: run through the shell with the report's paths as $1 and $2 and in
    HANGSCOPE_REPORT_JSON / HANGSCOPE_REPORT_MD; never waited for while watching."""

    command: str | None
    say: Callable[[str], None]
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self, capture: Capture) -> None:
        if not self.command:
            return
        verdict = capture.snapshot.verdict
        env = dict(os.environ, HANGSCOPE_REPORT_JSON=str(capture.json),
                   HANGSCOPE_REPORT_MD=str(capture.markdown),
                   HANGSCOPE_VERDICT=str(verdict.kind) if verdict else "unknown")
        try:
            self.running.append(subprocess.Popen(
                ["/bin/sh", "-c", self.command, "hangscope-on-hang", str(capture.json),
                 str(capture.markdown)], env=env, stdin=subprocess.DEVNULL))
        except OSError as exc:
            self.say(f"--on-hang could not run ({shlex.quote(self.command)}): {exc}")

    def wait(self) -> None:
        """At the watch's end: give each hook 30 s to finish (a Slack post, an issue)."""
        for hook in self.running:
            try:
                hook.wait(timeout=30)
            except subprocess.TimeoutExpired:
                hook.kill()
                hook.wait()
