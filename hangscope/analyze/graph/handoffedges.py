"""A thread waiting for a hand-off from its own process waits for the thread that feeds it.

An engine's main loop blocks in ``queue.Queue.get`` (or an Event, a Condition) for what its
input thread reads off a socket; a client library's caller waits on a Future its I/O thread
completes. Python does not record who will put, set or notify. When exactly one other thread
of the process (not a helper) waits on another process, that reader is the probable feeder:
the edge makes the chain go on through it (main -> input thread -> the API server), and says
"probable". With several such threads, or none, no edge: a guess among many is no evidence.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hangscope.analyze.evidence.working import notified_wait
from hangscope.frameworks import SERVE_WAITS, frame_at
from hangscope.model import Process, Thread
from hangscope.model.waits import WaitEdge


def _hand_off(thread: Thread) -> bool:
    """Blocked on a ``threading``/``queue`` hand-off (not a multiprocessing one: shared
    memory across processes, which another process sets; not a framework's serve-until-
    stopped call, gRPC's ``wait_for_termination``: an Event set when the server stops, which
    no reader of the process feeds)."""
    return notified_wait(thread) is not None and not any(
        not f.native and ((f.file or "").endswith("multiprocessing/synchronize.py")
                          or frame_at(f.name, f.file, SERVE_WAITS)) for f in thread.frames)


def handoff_edges(proc: Process, kernel_edges: Sequence[WaitEdge]) -> Iterator[WaitEdge]:
    """Probable edges thread -> its feeder thread, from the process's kernel edges."""
    outward = {e.tid for e in kernel_edges if e.pid == proc.pid and e.to_pid != proc.pid}
    waits = {e.tid for e in kernel_edges}
    feeders = [t for t in proc.threads if t.tid in outward and not t.helper and t.python]
    if len(feeders) != 1:
        return
    feeder = feeders[0]
    for thread in proc.threads:
        if thread.tid == feeder.tid or thread.tid in waits or thread.helper \
                or not _hand_off(thread):
            continue
        frame = notified_wait(thread)
        call = frame.name.rsplit(".", 1)[-1] if frame is not None else "wait"
        yield WaitEdge(proc.pid, thread.tid, "thread", f"thread {feeder.name or feeder.tid}",
                       f"{call}() on a hand-off from its own process; thread "
                       f"{feeder.name or feeder.tid} is the only other thread of it that waits "
                       "on another process: probably the one that feeds it",
                       to_pid=proc.pid, to_tid=feeder.tid, probable=True)
