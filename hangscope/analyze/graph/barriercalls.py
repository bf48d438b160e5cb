"""A producer's method that returns once every one of its consumers has called it waits for
the consumers that are not calling.

Ray Data's ``streaming_split`` hands each consumer (a Ray Train worker, an actor) an iterator
over one split; its coordinator actor starts an epoch only once every split's consumer has
called ``start_epoch`` (``SplitCoordinator._barrier`` polls until then). The consumers that
call are the processes whose gets wait on the coordinator now (analyze/graph/objectedges.py);
the one that does not call is a live process of the same class that waits on none of it: the
consumer that stopped reading its split. Which split each holds is in no stack, so each such
sibling gets a probable edge; with none, no edge (a consumer that never started: the
framework's own stall warning says so, frameworks/ray.py ``SPLIT_STALL``).
"""

from __future__ import annotations

from collections.abc import Sequence

from hangscope.analyze.evidence.stackmemo import Frames, per_stack
from hangscope.frameworks import ObjectWait, call_barrier_at, runs_method
from hangscope.model import Frame, Process, Snapshot, Thread
from hangscope.model.waits import WaitEdge


def called_method(frames: Sequence[Frame]) -> str | None:
    """The method a producer's thread runs a call of: the first frame inside the framework's
    executor (``ObjectWait.method_frame``) that is no wrapper of it (``<locals>``)."""
    python = [f for f in frames if not f.native]
    k = next((k for k, f in enumerate(python) if runs_method(f.name, f.file)), None)
    return next((f.name.rsplit(".", 1)[-1] for f in reversed(python[:k])
                 if "<locals>" not in f.name), None) if k else None


@per_stack  # asked of every thread of every process (131,072 ranks share a few stacks)
def _barrier_of(frames: Frames) -> ObjectWait | None:
    return call_barrier_at(frames)


def in_call_barrier(thread: Thread | None) -> ObjectWait | None:
    """The object wait whose barrier of calls ``thread`` is in, or None."""
    return _barrier_of(thread.frames) if thread is not None else None


def _class(wait: ObjectWait, proc: Process) -> str | None:
    found = wait.title_class.match(proc.title or "") if wait.title_class is not None else None
    return found.group("actor") if found else None


def barrier_edges(snap: Snapshot, known: Sequence[WaitEdge]) -> list[WaitEdge]:
    """Each thread in a barrier of calls -> every live process of its callers' class that is
    not one of them (probable)."""
    edges: list[WaitEdge] = []
    by_pid = {p.pid: p for p in snap.processes}
    for proc in snap.processes:
        if proc.is_exited:
            continue
        for thread in proc.threads:
            wait = in_call_barrier(thread)
            if wait is None:
                continue
            callers = {e.pid for e in known if e.kind == "object" and e.to_pid == proc.pid
                       and e.to_tid in (None, thread.tid)}
            classes = {c for pid in callers if pid in by_pid
                       and (c := _class(wait, by_pid[pid])) is not None}
            missing = [p for p in snap.processes if not p.is_exited and p.pid not in callers
                       and p.pid != proc.pid and _class(wait, p) in classes]
            method = called_method(thread.frames) or "it"
            edges.extend(WaitEdge(
                proc.pid, thread.tid, "object",
                f"a call to {method} from each of its consumers",
                f"{method} returns once every consumer has called it; {len(callers)} "
                f"wait on it now, and PID {p.pid}, of their class ({_class(wait, p)}), "
                "calls none", p.pid, p.working_tid, probable=len(missing) > 1)
                for p in missing)
    return edges
