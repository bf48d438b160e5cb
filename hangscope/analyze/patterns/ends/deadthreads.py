"""The wait-for graph's dead thread: a thread of a live process died with an exception, and
the job waits for what it would have done (a launcher polling a health check that stays
"loading", clients waiting on the launcher's Event).

Pure, over a classified Snapshot (analyze/graph/waitwalk.py's Graph). The output is the evidence:
the last traceback of the process's log starts in a function of the program's own code that
a thread of that process runs (the thread's target, ``loader_thread``), is not
``<module>`` (the main script's traceback ends the process), and no live thread of the
process is in that function any more. A traceback alone proves nothing (a handled error, a
request that failed): the job must also wait on a condition, not for work: another process
or thread polls in a sleep loop or waits on an Event, a lock or a future, and nothing of the
job computes.
"""

from __future__ import annotations

import os

from hangscope.analyze.evidence.failures import TRACEBACK_FILE
from hangscope.analyze.graph.liveness import job_computes
from hangscope.analyze.graph.loopedges import own_frames
from hangscope.analyze.graph.threadedges import user_frame
from hangscope.analyze.graph.waitwalk import Graph, site_words
from hangscope.model import Category, Process, in_library
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_WAITING = (Category.SLEEP, Category.LOCK)


def last_traceback(lines: tuple[str, ...], innermost: bool = False
                   ) -> tuple[tuple[str, int, str], str] | None:
    """(its first frame in the program's own code (path, line, function), the exception
    line) of the log's last traceback, or None: a thread's traceback printed by
    ``threading.excepthook`` starts in threading.py, the thread's target follows. A log tail
    may begin inside a traceback, or interleave several processes' (a Pool's workers dying
    together): the frames that end in an exception line make one, header or not.
    ``innermost``: its last frame in the program's own code (where it was raised) instead."""
    found = None
    frames: list[tuple[str, int, str]] = []
    for line in lines:
        if line.startswith("Traceback (most"):
            frames = []
        elif line[:1].isspace() and (m := TRACEBACK_FILE.match(line.lstrip())) is not None:
            frames.append((m[1], int(m[2]), m[3]))
        elif line and not line[0].isspace() and frames:
            own = [f for f in frames if not in_library(f[0])]
            if own:
                found = (own[-1] if innermost else own[0]), line.strip()
            frames = []
    return found


def dead_thread(g: Graph) -> WaitPattern | None:
    # Only a log can tell a thread died: most ranks of a large job have none to read.
    logged = [p for p in g.snap.processes if p.log_tail and not p.is_exited]
    if not logged or job_computes(g.snap):
        return None
    live = [p for p in g.snap.processes if not p.is_exited]
    seen: set[tuple[str, str]] = set()
    for proc in logged:
        found = last_traceback(proc.log_tail)
        if found is None or (found[0][0], found[0][2]) in seen:
            continue
        (path, line, func), error = found
        seen.add((path, func))
        if func == "<module>" or any(f.file == path and f.name.rsplit(".", 1)[-1] == func
                                     for p in live for t in p.threads for f in t.frames):
            continue  # the script's own traceback, or a thread still runs that function
        owner = _owner(live, proc, path)
        if owner is None:
            continue
        proc = owner
        waiting = _waiters(live, proc)
        if not waiting:
            continue
        said = "; ".join(f"{who(p)} {_verb(p)}{site_words(p.working_thread)}"
                         for p in waiting[:4])
        more = f" and {len(waiting) - 4} more" if len(waiting) > 4 else ""
        chain = (f"the thread of {who(proc)} that ran {func} ({os.path.basename(path)}:{line}) "
                 f"died: the last traceback of its log ends in {error!r}, and no thread of it "
                 f"runs {func} any more; the job waits for what that thread would have done: "
                 f"{said}{more}; fix the error, and make the process fail (exit, or report "
                 "the failure to whoever waits) when that thread dies")
        members = tuple(dict.fromkeys((proc.pid, *(p.pid for p in waiting))))
        return WaitPattern("dead_thread", members, chain, (),
                           proc.pid, None)
    return None


def _owner(live: list[Process], logged: Process, path: str) -> Process | None:
    """The process that ran the traceback's file among those writing the same log: the one
    whose own frames (not a forked child's copies of its parent's) run that file as its
    script (``<module>``), else the one with the most own frames in it."""
    logs = set(logged.log_files)
    scores = []
    for proc in live:
        if logs.isdisjoint(proc.log_files):
            continue
        mine = [f for t in proc.threads for f in own_frames(t) if f.file == path]
        if mine:
            scores.append((any(f.name == "<module>" for f in mine), len(mine), proc))
    return max(scores, key=lambda s: s[:2])[2] if scores else None


def _waiters(live: list[Process], dead: Process) -> list[Process]:
    """The processes whose working thread waits on a condition (a sleep loop's poll, an Event,
    a lock): not for work. The dead thread's own process too, where its working thread does
    (a trainer polling for the batches its prefetch thread made)."""
    out = []
    for proc in sorted(live, key=lambda p: p is not dead):
        thread = proc.working_thread
        if thread is not None and thread.category in _WAITING and user_frame(thread):
            out.append(proc)
    return out


def _verb(proc: Process) -> str:
    thread = proc.working_thread
    return "polls in a sleep loop" if thread is not None and thread.category is \
        Category.SLEEP else "waits on a lock or an event"
