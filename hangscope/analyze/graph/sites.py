"""Where a wait is, in the user's words: beside a library's frame, the program's own function
that called it (issue 35: the site is the innermost frame of the user's code on the blocked
thread, and above the fork point in a forked child)."""

from __future__ import annotations

from hangscope.model import Frame, Thread, in_library


def called_from(thread: Thread, frame: Frame | None = None) -> str:
    """`` (called from record (app.py:17))`` where the thread's site (or ``frame``) is a
    library's frame (logging's ``Handler.acquire``) that the program's own code called: the
    user's frame is where to look (issue 35: the site is the innermost frame of the user's
    code, above the fork point in a forked child)."""
    python = [f for f in thread.frames if not f.native and f.file]
    at = next((k for k, f in enumerate(python) if (f is frame if frame is not None else
               thread.site == f"{f.name} ({f.short_file}:{f.line})")), None)
    if at is None or not in_library(python[at].file):
        return ""
    for f in python[at + 1:]:
        if (f.file or "").endswith(_FORK_POINTS):
            return ""  # below it, the parent's frames from before the fork: not this process's
        if not in_library(f.file):
            return f" (called from {f.name} ({f.short_file}:{f.line}))"
    return ""


#: Where a child started by multiprocessing begins its own life: the frames below (outer) are
#: its parent's, copied by fork.
_FORK_POINTS = ("multiprocessing/process.py", "multiprocessing/popen_fork.py",
                "multiprocessing/spawn.py")
