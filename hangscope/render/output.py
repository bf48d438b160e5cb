"""Render a Snapshot in a format and write it: to the terminal, or to a 0600 file."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from rich.console import Console

from hangscope.errors import UsageError
from hangscope.model import Snapshot
from hangscope.render.markdown import render_markdown
from hangscope.render.text import report
from hangscope.serialize import dumps

FORMATS = ("text", "md", "json")


def render(snap: Snapshot, fmt: str, color: bool = False, width: int = 120,
           native: bool = True) -> str:
    """The report as a string in ``text``, ``md`` or ``json``."""
    if fmt == "json":
        return dumps(snap) + "\n"
    if fmt == "md":
        return render_markdown(snap)
    if fmt == "text":
        buf = io.StringIO()
        console = Console(file=buf, width=width, force_terminal=color, no_color=not color,
                          color_system="truecolor" if color else None, soft_wrap=False)
        console.print(report(snap, native=native))
        return buf.getvalue()
    raise UsageError(f"Unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")


def write_private(path: str | Path, text: str) -> Path:
    """Write a report readable by its owner only (0600): it describes production processes.

    Raises:
        UsageError: the file cannot be written (directory missing, no permission).
    """
    p = Path(path)
    try:
        # O_NOFOLLOW: a symlink planted in a shared directory cannot redirect the report.
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise UsageError(f"Cannot write {path}: {exc.strerror}.") from None
    return p


def emit(snap: Snapshot, fmt: str, output: str | None, native: bool = True) -> None:
    """Print the report, or write it to ``output`` and say where."""
    if output and output != "-":
        write_private(output, render(snap, fmt, native=native))
        print(f"hangscope: wrote {fmt} report to {output}", file=sys.stderr)
        return
    if fmt == "text":
        console = Console(soft_wrap=False)
        console.print(report(snap, native=native))
    else:
        sys.stdout.write(render(snap, fmt))
        sys.stdout.flush()
