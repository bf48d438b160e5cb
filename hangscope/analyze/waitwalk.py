"""Walking the wait-for graph: who a thread waits for next, and how a thread is named in a chain.

Pure, over a classified Snapshot and its edges (analyze/waitgraph.py); shared by the patterns of
analyze/waitpatterns.py and analyze/threadpatterns.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.waitgraph import blocked as _blocked
from hangscope.analyze.waitgraph import edges_from, user_frame
from hangscope.model import Process, Snapshot, Thread
from hangscope.model.waits import WaitEdge
from hangscope.words import who

#: The frames of a running asyncio loop (base_events.py).
LOOP = ("_run_once", "run_forever", "run_until_complete")


class Graph:
    """The edges of one snapshot, by waiter, with its processes and threads."""

    def __init__(self, snap: Snapshot, edges: Sequence[WaitEdge]) -> None:
        self.snap = snap
        self.edges = edges
        self.procs = {p.pid: p for p in snap.processes}
        self.out = edges_from(edges)
        self.threads = {(p.pid, t.tid): t for p in snap.processes for t in p.threads}

    def live_edges(self, pid: int, tid: int | None) -> list[int]:
        """Edges out of a thread still blocked; tid None: out of the process's working thread
        (the thread that says where it is: a pool's reader threads wait for data, they are
        not what the process waits on)."""
        if tid is None:
            proc = self.procs.get(pid)
            tid = proc.working_tid if proc is not None else None
        found = [i for i in self.out.get(pid, []) if self.edges[i].tid == tid
                 and (t := self.threads.get((pid, tid))) is not None and _blocked(t)]
        # Another process before its own; a thread that itself waits before an idle one.
        found.sort(key=lambda i: (self.edges[i].to_pid == pid and self.edges[i].to_tid is None,
                                  not self._waits(self.edges[i])))
        return found

    def _waits(self, edge: WaitEdge) -> bool:
        if edge.to_pid is None:
            return True
        if edge.to_tid is None:
            return edge.to_pid != edge.pid
        return any(self.edges[i].tid == edge.to_tid for i in self.out.get(edge.to_pid, []))

    def walk(self, pid: int, tid: int | None) -> tuple[list[int], int | None]:
        """Follow the first wait from (pid, tid): (edges followed, index where a cycle
        starts in that list, or None: it ended at a sink)."""
        path: list[int] = []
        seen: dict[tuple[int, int | None], int] = {}
        node: tuple[int, int | None] = (pid, tid)
        while True:
            out = self.live_edges(*node)
            if not out:
                return path, None
            edge = self.edges[out[0]]
            here = (edge.pid, edge.tid)
            if here in seen:
                return path, seen[here]
            seen[here] = len(path)
            path.append(out[0])
            if edge.to_pid is None or edge.to_pid not in self.procs or (
                    edge.to_pid == edge.pid and edge.to_tid is None):
                return path, None  # outside the job, or its own process holds the other end
            node = (edge.to_pid, edge.to_tid)


def thread_words(proc: Process, thread: Thread | None) -> str:
    if thread is None or len([t for t in proc.threads if t.python]) <= 1:
        return who(proc)
    return f"thread {thread.name or thread.tid} of {who(proc)}"


def site_words(thread: Thread | None) -> str:
    if thread is None:
        return ""
    if thread.site:  # the user's line that called into the wait (classify.py)
        return f" at {thread.site}"
    frame = user_frame(thread)
    if frame is not None:
        return f" at {frame.name} ({frame.short_file}:{frame.line})"
    return f" at {thread.site}" if thread.site else ""
