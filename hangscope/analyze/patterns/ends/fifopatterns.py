"""The wait-for graph's FIFO opens: threads blocked in ``open()`` of a named pipe that no
process of the job opens from the other end.

Pure, over the graph's ``fifo_open`` edges (analyze/graph/waitgraph.py: the path comes from the
blocked thread's memory, collect/procfs.py). ``open()`` of a FIFO returns only once another
process opens it the other way, so a blocked opener has no partner in the job. Where two
openers wait on two FIFOs of one directory, one for reading and one for writing, each side
waits for the other on a path the other never opens: the two derive the name differently.
"""

from __future__ import annotations

import os

from hangscope.analyze.evidence.deadscripts import dead_words
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.analyze.patterns.behind import behind
from hangscope.model.waits import WaitPattern


def fifo_open(g: Graph) -> WaitPattern | None:
    """Every thread blocked opening a FIFO nobody opens, and what waits on them."""
    opens = [i for i, e in enumerate(g.edges) if e.kind == "fifo_open"]
    if not opens:
        return None
    clauses = []
    for i in opens:
        edge = g.edges[i]
        proc = g.procs[edge.pid]
        me = thread_words(proc, g.threads.get((edge.pid, edge.tid)))
        path, mode = _opened(g, i)
        clauses.append(f"{me} is blocked opening FIFO {path} for {mode}"
                       f"{site_words(g.threads.get((edge.pid, edge.tid)))}: "
                       f"{edge.outside}")
    members = tuple(dict.fromkeys(g.edges[i].pid for i in opens))
    # Two names: each side is the other's partner. Else no partner in the job: the process
    # meant to be one may have crashed (its traceback).
    why = _mismatch(g, opens) or dead_words(g.snap) + _NO_PARTNER
    chain = "; ".join(clauses) + why + behind(g, members)
    return WaitPattern("fifo_open", members, chain, tuple(opens), members[0],
                       g.edges[opens[0]].tid, members[1:])


def _opened(g: Graph, i: int) -> tuple[str, str]:
    """(path, "reading" or "writing") of fifo_open edge ``i`` (waitgraph.py's object)."""
    path, _, mode = g.edges[i].object.removeprefix("FIFO ").rpartition(" (opened for ")
    return path, mode.rstrip(")")


def _mismatch(g: Graph, opens: list[int]) -> str:
    """Openers for reading and for writing of different FIFOs in one directory: each waits for
    the other, on a name the other does not use ("" where none)."""
    by_dir: dict[str, dict[str, set[str]]] = {}
    for i in opens:
        path, mode = _opened(g, i)
        by_dir.setdefault(os.path.dirname(path), {}).setdefault(mode, set()).add(
            os.path.basename(path))
    for folder, modes in by_dir.items():
        readers, writers = modes.get("reading", set()), modes.get("writing", set())
        if readers and writers and not readers & writers:
            names = ", ".join(sorted(readers | writers))
            return (f". The reader and the writer open different FIFOs of {folder} ({names}): "
                    "each waits for a partner on a name the other never opens; derive the "
                    "path the same way on both sides")
    return ""


_NO_PARTNER = ". open() of a FIFO returns only once another process opens its other end"
