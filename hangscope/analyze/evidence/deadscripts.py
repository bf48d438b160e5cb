"""Scripts of the job that died: a Python traceback in a log the job writes, whose outermost
frame is a script no live process of the job runs.

Pure, over the log tails the collector read (``Process.log_tail``, redacted). A process that
crashed and was reaped leaves no process to sample, only its traceback in the output it
shared with the rest of the job (a launcher's log, a shell's redirect): ``File
".../metrics_sidecar.py", line 8, in <module>`` names the script it ran, and the last line the
exception. When a wait needs a partner nobody in the job provides (a FIFO's other end, a
reply), the script that should have is often that one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from hangscope.model import Snapshot

_FILE = re.compile(r'^\s*File "([^"]+)", line \d+, in <module>')


def _tracebacks(lines: Sequence[str]) -> list[tuple[str, str]]:
    """(the script of its outermost frame, the exception line) of each whole traceback."""
    out = []
    script: str | None = None
    inside = False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            inside, script = True, None
            continue
        if not inside:
            continue
        found = _FILE.match(line)
        if found and script is None:
            script = found.group(1)
        elif line and not line[0].isspace():  # the exception: the block's first unindented line
            if script is not None:
                out.append((script, line.strip()))
            inside = False
    return out


def dead_scripts(snap: Snapshot) -> list[tuple[str, str]]:
    """(script path, its exception) of each traceback in the job's logs whose script no live
    process of the job has on its command line."""
    running = {os.path.basename(a) for p in snap.processes if not p.is_exited
               for a in p.cmdline if a.endswith(".py")}
    seen: dict[str, str] = {}
    for proc in snap.processes:
        for script, error in _tracebacks(proc.log_tail):
            if os.path.basename(script) not in running:
                seen[script] = error
    return list(seen.items())


def dead_words(snap: Snapshot) -> str:
    """``; the job's output has a traceback from metrics_sidecar.py (ValueError: ...), a
    script no live process of the job runs: it died``, or nothing."""
    dead = dead_scripts(snap)
    if not dead:
        return ""
    script, error = dead[-1]
    return (f"; the job's output has a traceback from {os.path.basename(script)} ({error}), a "
            "script no live process of the job runs: the process that ran it died")
