"""The GIL held in a blocking call: a thread that owns the GIL blocks in the kernel (a
``ctypes.PyDLL`` call keeps it), and the threads that could end its wait wait for the GIL.
"""

from __future__ import annotations

from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.graph.waitwalk import Graph, site_words, thread_words
from hangscope.model import Frame
from hangscope.model.waits import WaitPattern
from hangscope.words import who

_CTYPES = ("_ctypes_callproc", "PyCFuncPtr_call", "ffi_call")


@per_stack
def _ctypes_call(frames: tuple[Frame, ...]) -> bool:
    """A native frame of a ctypes call: only a thread with one can hold the GIL in a native
    lock wait (gil_native_wait asks the stack index for the processes with such a thread)."""
    return any(f.native and f.name in _CTYPES for f in frames)


def gil_ring(g: Graph, ring: list[int]) -> WaitPattern:
    """A thread blocked in the kernel while it owns the GIL, on a pipe only its own process
    can write, and every other Python thread of that process waits for that GIL."""
    pipe = next(g.edges[i] for i in ring if g.edges[i].kind != "gil")
    pid = pipe.pid
    proc = g.procs[pid]
    owner = g.threads.get((pid, pipe.tid))
    starved = [g.threads.get((pid, e.tid)) for e in g.edges
               if e.kind == "gil" and e.pid == pid and e.to_tid == pipe.tid]
    names = [t.name or str(t.tid) for t in starved if t is not None]
    first = g.threads.get((pid, pipe.to_tid or 0))
    if first is not None and (first.name or str(first.tid)) in names:
        names.remove(first.name or str(first.tid))
        names.insert(0, first.name or str(first.tid))
    call = pipe.how.split("(", 1)[0]
    via = ""
    if owner is not None and any(f.native and f.name in _CTYPES for f in owner.frames):
        via = " through ctypes (a ctypes.PyDLL function keeps the GIL while it runs)"
    what = pipe.object.split(" (")[0]
    site = site_words(owner)
    threads = (f"thread {names[0]}" if len(names) == 1 else
               "threads " + ", ".join(names[:-1]) + f" and {names[-1]}")
    # The processes whose own wait leads here, not every holder of a socket's inherited end.
    clients = sorted(c for c in {e.pid for e in g.edges if e.to_pid == pid and e.pid != pid}
                     if any(g.edges[k].to_pid == pid for k in g.walk(c, None)[0]))
    tail = ""
    if clients:
        tail = "; " + ", ".join(who(g.procs[c]) for c in clients[:4]) + (
            " wait" if len(clients) > 1 else " waits") + " for it"
    one = len(names) == 1
    chain = (f"{thread_words(proc, owner)} holds the GIL while blocked in {call} on {what}"
             f"{site}{via}, and {threads}, the only {'one' if one else 'ones'} that could "
             f"write that pipe (no other process holds its write end), wait{'s' if one else ''}"
             " for the GIL"
             f"{tail}: release the GIL around the blocking call (ctypes.CDLL rather than "
             "PyDLL; Py_BEGIN_ALLOW_THREADS in a C extension)")
    return WaitPattern("gil_hold", (pid, *clients), chain, tuple(ring), pid, pipe.tid)


def gil_native_wait(g: Graph) -> WaitPattern | None:
    """A thread owns the GIL while blocked on a native lock (a futex: ``sem_wait`` through a
    ``ctypes.PyDLL`` function), and every other Python thread of its process waits for that
    GIL: none can run, so none can release the lock, which only a thread of the process can
    (an in-process lock)."""
    for proc in g.having(_ctypes_call):  # (the owner's stack is in a ctypes call)
        owner = next((t for t in proc.threads if t.owns_gil), None)
        if owner is None or owner.active or owner.state not in ("S", "D") or not (
                owner.wchan or "").startswith("futex"):
            continue
        if not _ctypes_call(owner.frames):
            continue  # a futex wait outside a native call: a Python lock, the lock rules say
        others = [t for t in proc.threads if t.tid != owner.tid and t.python]
        starved = {e.tid for e in g.edges if e.kind == "gil" and e.pid == proc.pid
                   and e.to_tid == owner.tid}
        if not others or any(t.tid not in starved for t in others):
            continue
        edges = tuple(i for i, e in enumerate(g.edges) if e.kind == "gil" and e.pid == proc.pid)
        names = [t.name or str(t.tid) for t in others]
        threads = (f"thread {names[0]}" if len(names) == 1 else
                   "threads " + ", ".join(names[:-1]) + f" and {names[-1]}")
        chain = (f"{thread_words(proc, owner)} holds the GIL while blocked on a native lock "
                 f"(a futex){site_words(owner)} through ctypes (a ctypes.PyDLL function keeps "
                 f"the GIL while it runs), and {threads}, every other Python thread of it, "
                 f"wait{'s' if len(names) == 1 else ''} for the GIL: none can run to release "
                 "that lock (a thread of this process holds it, and needs the GIL to go on): "
                 "release the GIL around the blocking call (ctypes.CDLL rather than PyDLL)")
        return WaitPattern("gil_hold", (proc.pid,), chain, edges, proc.pid, owner.tid)
    return None
