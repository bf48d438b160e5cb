"""Words for the odd rank of a straggler verdict that does not work but is blocked elsewhere.

README's straggler computes or compiles while the others wait for it. A rank that waits on a
lock, a pipe or a FIFO instead is blocked elsewhere; one whose main thread sits in
``threading._shutdown`` has left its main code and is exiting, joining a non-daemon thread;
one in multiprocessing's ``_exit_function`` is exiting too, joining a non-daemon child process.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.evidence.facts import BUSY, Facts
from hangscope.model import Process
from hangscope.words import short_who


def _in_shutdown(proc: Process) -> bool:
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    return main is not None and any(
        not f.native and f.name == "_shutdown" and (f.file or "").endswith("threading.py")
        for f in main.frames)


def _joining_children_at_exit(proc: Process) -> bool:
    """multiprocessing's atexit hook (``_exit_function`` in multiprocessing/util.py) joins
    every non-daemon child process before the process can exit."""
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    return main is not None and any(
        not f.native and f.name == "_exit_function"
        and (f.file or "").endswith("multiprocessing/util.py") for f in main.frames)


def exiting_words(proc: Process) -> str | None:
    """``rank 0 is exiting: ... (log-uploader)`` for a process joining threads or child
    processes at exit."""
    if _joining_children_at_exit(proc):
        kids = ", ".join(f"PID {c}" for c in proc.children[:4]) or "a child process"
        return (f"{short_who(proc)} is exiting: its main code returned, and multiprocessing "
                f"joins its non-daemon child process ({kids}) before it can exit")
    if not _in_shutdown(proc):
        return None
    others = [t.name or str(t.tid) for t in proc.threads
              if t.tid != proc.pid and t.python and not t.helper and t.frames]
    joined = (f"the non-daemon thread{'s' if len(others) > 1 else ''} {', '.join(others[:4])}"
              if others else "a non-daemon thread")
    return (f"{short_who(proc)} is exiting: its main code returned, and Python joins {joined} "
            "before it can exit")


def straggler_head(facts: Facts, odd: Sequence[Process]) -> str:
    """``Straggler: `` when an odd rank works, ``Blocked elsewhere: `` when none does."""
    working = any(facts.categories[p.key] in BUSY for p in odd)
    return "Straggler: " if working else "Blocked elsewhere: "


def exiting_note(odd: Sequence[Process]) -> str:
    """`` (rank 0 is exiting: ...)`` for the odd ranks that are exiting; empty otherwise."""
    notes = [w for p in odd if (w := exiting_words(p)) is not None]
    return f" ({'; '.join(notes)})" if notes else ""
