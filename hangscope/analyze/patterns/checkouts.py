"""A pool emptied by nested checkouts: every thread that holds one of a pool's resources waits
inside the pool's checkout for a second one.

A pool hands a resource (a connection, a lease, a slot) to the block of ``with
pool.connection() as conn:`` and takes it back when the block ends, as ``with lock:`` holds a
lock. Python does not say who holds one; the source does: a frame whose line is inside that
block holds what ``connection()`` handed it (collect/source.py records the enclosing
with-calls as ``Frame.within``). A thread blocked, deeper on the same stack, inside a frame of
that same function (the checkout, waiting on its queue, condition or semaphore for a resource
to come back) asks for a second one while it holds the first. When every thread of the process
that holds one waits that way, nobody gives one back: the pool is empty for good (N threads of
a pool of N, each two checkouts deep). One holder doing anything else may still return its
resource, so the pattern needs all of them.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.graph.threadedges import blocked, user_frame
from hangscope.analyze.graph.waitwalk import Graph, hops_into, thread_names, waits_into
from hangscope.model import Category, Frame, Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who

#: A nested checkout: the function's name, the frame holding the first (inside its with), the
#: pool's checkout frame the thread waits in, and the frame that asked for the second.
_Nested = tuple[str, Frame, Frame, Frame | None]


@lru_cache(maxsize=4096)
def called_name(text: str) -> str | None:
    """``connection`` of ``self.pool.connection(timeout=3)``: the last name of the function a
    with-item's call calls (None: not a call of a name)."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    func = node.func if isinstance(node, ast.Call) else None
    return (func.attr if isinstance(func, ast.Attribute)
            else func.id if isinstance(func, ast.Name) else None)


def _holds(frame: Frame) -> set[str]:
    return {n for text in frame.within if (n := called_name(text)) is not None}


@per_stack  # asked of every thread of every rank: once per distinct stack
def _inside_with(frames: tuple[Frame, ...]) -> bool:
    return any(f.within for f in frames if not f.native)


def _nested(thread: Thread) -> _Nested | None:
    """The thread waits inside a checkout function for a resource while an outer frame of
    its own stack is inside a with-block over a call of that same function."""
    if not _inside_with(thread.frames) or not blocked(thread) \
            or thread.category is not Category.LOCK:
        return None  # (a holder below is a frame inside a with-block: none, no holder)
    python = [f for f in thread.frames if not f.native]  # innermost first
    for k, frame in enumerate(python):
        name = frame.name.rsplit(".", 1)[-1]
        holder = next((f for f in python[k + 1:] if name in _holds(f)), None)
        if holder is None:
            continue
        asked = next((f for f in python[k + 1:] if f.file and not f.file.endswith(
            "contextlib.py")), None)
        return name, holder, frame, asked
    return None


def _holders(proc: Process, name: str) -> list[Thread]:
    return [t for t in proc.threads if any(name in _holds(f) for f in t.frames
                                           if not f.native)]


def nested_checkout(g: Graph) -> WaitPattern | None:
    """Every holder of a pool's resource waits inside that pool's checkout for another."""
    for proc in g.having(_inside_with):  # (a holder is a frame inside a with-block)
        if proc.is_exited or len(proc.threads) < 1:
            continue
        by_name: dict[str, list[tuple[Thread, _Nested]]] = {}
        for thread in proc.threads:
            found = _nested(thread)
            if found is not None:
                by_name.setdefault(found[0], []).append((thread, found))
        for name, waiting in sorted(by_name.items(), key=lambda kv: -len(kv[1])):
            holders = _holders(proc, name)
            if {t.tid for t in holders} != {t.tid for t, _ in waiting}:
                continue  # a holder does something else: it may give one back
            waiting.sort(key=lambda tw: tw[0].tid)
            first, (_, holder, checkout, asked) = waiting[0]
            text = next(t for t in holder.within if called_name(t) == name)
            inner = asked or user_frame(first)
            where = f" at {inner.name} ({inner.location})" if inner is not None else ""
            threads = [t for t, _ in waiting]
            each = "holds" if len(threads) == 1 else "each hold"
            chain = (f"{thread_names(threads)} of {who(proc)} {each} one from {text} (held in "
                     f"{holder.name} ({holder.location})) and wait inside it for a second"
                     f"{where}, in {checkout.name} ({checkout.location}): every holder waits "
                     "for another checkout, so none gives one back and the pool stays empty")
            others, into = waits_into(g, proc.pid)
            chain += hops_into(g, into)
            chain += ("; pass the resource it holds down to the inner call instead of taking "
                      "another (or size the pool above threads x nesting depth)")
            return WaitPattern("nested_checkout", (proc.pid, *others), chain, tuple(into),
                               proc.pid, first.tid)
    return None
