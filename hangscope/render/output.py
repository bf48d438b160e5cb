"""Render a Snapshot in a format and write it: to the terminal, or to a 0600 file."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from hangscope.errors import UsageError
from hangscope.model import Snapshot
from hangscope.model.serialize import dumps
from hangscope.render import FORMATS
from hangscope.render.markdown import render_markdown
from hangscope.render.text import report


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
        return buf.getvalue() if color else "\n".join(
            line.rstrip() for line in buf.getvalue().split("\n"))
    raise UsageError(f"Unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")


def _check_target(p: Path, path: str | Path) -> None:
    """Refuse a name that is not an ordinary file of ours: writing through it could block
    (a FIFO), hit a device, follow a link planted in a shared directory, or clobber a file
    of another user."""
    try:
        st = p.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"Cannot write {path}: {exc.strerror}.") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"Refusing to write {path}: it is a symbolic link; give the path of "
                         "the file itself, or a new name.")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO"
                if stat.S_ISFIFO(st.st_mode) else "a device or socket")
        raise UsageError(f"Refusing to write {path}: it is not a regular file ({kind}); give "
                         "a new file name, or leave out -o to print the report.")
    if st.st_uid != os.geteuid():
        raise UsageError(f"Refusing to overwrite {path}: it belongs to another user "
                         f"(UID {st.st_uid}); give a new file name.")


def write_private(path: str | Path, text: str) -> Path:
    """Write a report readable by its owner only (0600): it describes production processes.

    The report goes to a new temp file beside ``path`` (``O_EXCL``, 0600), renamed over
    ``path`` once whole: a reader never sees half a report, and nothing already at ``path``
    (a hard link, a FIFO) is opened.

    Raises:
        UsageError: ``path`` is not a regular file of this user, or cannot be written.
    """
    p = Path(path)
    _check_target(p, path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        os.fchmod(fd, 0o600)  # mkstemp makes it 0600; whatever the umask, keep it so
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        raise UsageError(f"Cannot write {path}: {exc.strerror or exc}.") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return p


def emit(snap: Snapshot, fmt: str, output: str | None, native: bool = True) -> None:
    """Print the report, or write it to ``output`` and say where."""
    if output and output != "-":
        write_private(output, render(snap, fmt, native=native))
        print(f"hangscope: wrote {fmt} report to {output}", file=sys.stderr)
        return
    if fmt == "text":
        console = Console(soft_wrap=False)
        if not console.is_terminal:  # a pipe or a file: no colour, no padding at line ends
            text = render(snap, fmt, width=console.width, native=native)
            sys.stdout.write("\n".join(line.rstrip() for line in text.split("\n")))
            sys.stdout.flush()
            return
        console.print(report(snap, native=native))
    else:
        sys.stdout.write(render(snap, fmt))
        sys.stdout.flush()
