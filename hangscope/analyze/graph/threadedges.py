"""Wait-for edges between the threads of one process: Python locks (the holder from the source,
``Frame.holds``/``Frame.takes``, else the probable one), the GIL's owner, thread joins; and the
thread-level facts the patterns read (is it blocked, on a lock, its user frame).

Pure, over classified threads; analyze/graph/waitgraph.py joins these with the kernel's edges.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from hangscope.analyze.evidence.facts import blocked
from hangscope.model import Category, Frame, Process, Thread, in_library
from hangscope.model.waits import WaitEdge

_LIB = ("/threading.py", "/queue.py", "/multiprocessing/", "/concurrent/", "/importlib/")


def user_frame(thread: Thread) -> Frame | None:
    """The innermost Python frame outside the standard library's locking plumbing."""
    return next((f for f in thread.frames if not f.native and f.file
                 and not f.file.endswith(_LIB) and not any(m in f.file for m in _LIB)), None)


def own_frame(thread: Thread) -> Frame | None:
    """The innermost Python frame of the program's own code (no library's): the line that
    made the call the thread waits in."""
    return next((f for f in thread.frames if not f.native and not in_library(f.file)), None)


def at_loop_head(thread: Thread | None) -> bool:
    """The thread's innermost frame of the program's own code waits for its loop's next item
    (``Frame.loop_next``: a ``for`` header, a ``while True:`` body's first statement): a
    worker waiting for work, not a client waiting for a reply."""
    own = own_frame(thread) if thread is not None else None
    return own is not None and own.loop_next


def executor_worker(thread: Thread) -> bool:
    """The thread is a ``concurrent.futures.ThreadPoolExecutor`` worker."""
    return any(not f.native and (f.file or "").endswith("concurrent/futures/thread.py")
               and f.name.rsplit(".", 1)[-1] == "_worker" for f in thread.frames)


def runs_task(thread: Thread) -> bool:
    """A pool's worker thread (a helper while it idles) running a task: a frame of the task,
    outside the standard library's plumbing, over the worker loop."""
    return executor_worker(thread) and user_frame(thread) is not None


def waits_on_lock(thread: Thread) -> bool:
    """Blocked acquiring a lock, not joining a thread or waiting to be notified."""
    if thread.helper or not thread.python or thread.category is not Category.LOCK:
        return False
    # Waiting to be notified (Event, Condition, Queue, threading's or multiprocessing's) is
    # idling for a producer, not contending for a lock somebody holds.
    leaf = next((f for f in thread.frames if not f.native), None)
    if leaf is not None and leaf.file and leaf.file.endswith(_NOTIFY) \
            and leaf.name.rsplit(".", 1)[-1] in ("wait", "get", "wait_for", "put"):
        return False
    return not joins(thread)


def joins(thread: Thread) -> bool:
    """Inside ``Thread.join`` (its lock wait is the joined thread's end, not a lock): it can
    set, put or arrive at nothing until the thread it joins has ended."""
    return any(not f.native and f.name.endswith(("join", "_wait_for_tstate_lock"))
               for f in thread.frames[:8])


_NOTIFY = ("threading.py", "queue.py", "multiprocessing/synchronize.py",
           "multiprocessing/queues.py")


def waits_for_gil(thread: Thread) -> bool:
    """In ``take_gil``: the signature says so, or (take_gil inlined, no symbol) the innermost
    named native frame is a condition-variable wait: CPython's locks wait on semaphores on
    Linux (``sem_clockwait``), its GIL on a condition variable. Read only where a GIL owner
    is blocked in the kernel (:func:`_gil_edges`)."""
    if thread.category is Category.GIL_WAIT:
        return True
    for frame in thread.frames:
        if not frame.native:
            return False
        if not frame.name.startswith("0x"):
            # A blocking call that returned and waits to take the GIL back on its way out
            # (Py_END_ALLOW_THREADS): py-spy still shows the call, the kernel a futex wait.
            returned = frame.name in _RELEASING and (thread.wchan or "").startswith("futex")
            return returned or frame.name.startswith((
                "pthread_cond_timedwait", "pthread_cond_wait", "pthread_cond_clockwait"))
    return False


#: Calls that release the GIL around a kernel wait that is no futex.
_RELEASING = frozenset({"read", "write", "recv", "recvfrom", "recvmsg", "send", "sendto",
                        "sendmsg", "__libc_read", "__libc_write", "poll", "select", "accept",
                        "accept4", "epoll_wait", "clock_nanosleep", "nanosleep"})


def gil_edges(proc: Process) -> Iterator[WaitEdge]:
    owner = next((t for t in proc.threads if t.owns_gil), None)
    if owner is None or owner.active or owner.state not in ("S", "D"):
        return  # a GIL owner that runs Python releases it every 5 ms: no one waits on it
    for thread in proc.threads:
        if thread.tid != owner.tid and waits_for_gil(thread):
            yield WaitEdge(proc.pid, thread.tid, "gil", f"the GIL of PID {proc.pid}",
                           "take_gil (a bare condition wait) in its native stack; py-spy: "
                           "the other thread owns_gil while blocked in the kernel",
                           to_pid=proc.pid, to_tid=owner.tid)


def own_end_writers(proc: Process, edges: Sequence[WaitEdge]) -> list[WaitEdge]:
    """``edges`` of ``proc``, with each pipe or FIFO wait whose other end only ``proc`` holds
    pointed at the thread that would write it, where that is known: the waiter owns the GIL
    while blocked in the kernel (a ctypes.PyDLL call, a C extension that never releases it)
    and another Python thread of the process waits for that GIL. While the owner blocks, no
    other thread can run Python (one sleeping now waits for the GIL when it wakes), so
    whichever is the writer cannot write: the wait is a cycle, not a thread idling for its
    own process."""
    gil = [e for e in edges if e.kind == "gil" and e.pid == proc.pid]
    python = [t for t in proc.threads if t.python]
    out = []
    for edge in edges:
        if edge.kind not in ("pipe", "fifo") or edge.to_pid != proc.pid \
                or edge.to_tid is not None:
            out.append(edge)
            continue
        starved = [e.tid for e in gil if e.to_tid == edge.tid]
        others = [t for t in python if t.tid != edge.tid]
        if not starved:
            out.append(edge)
            continue
        by_tid = {t.tid: t for t in others}
        # A helper (a heartbeat, a watchdog) is the least likely writer of a program's pipe.
        starved.sort(key=lambda tid: by_tid[tid].helper)
        first = by_tid[starved[0]]
        rest = len(starved) - 1
        also = f" (and {rest} other thread{'s' if rest > 1 else ''})" if rest else ""
        out.append(replace(edge, to_tid=first.tid, how=(
            f"{edge.how}; only its own process holds the other end, and its other thread "
            f"{first.name or first.tid}{also} waits for the GIL this thread owns")))
    return out


LockKey = tuple[str | None, str | None, str]  # file, class (for self.X), the lock's text


def lock_key(frame: Frame, text: str) -> LockKey:
    """Which lock ``text`` names in ``frame``: ``self.X`` is the attribute of the method's
    class (py-spy's ``Class.method``), any other name is the module's."""
    scope = None
    if text == "self" or text.startswith(("self.", "cls.")):
        scope = frame.name.rsplit(".", 1)[0] if "." in frame.name else None
    return frame.file, scope, text


def taking_frame(thread: Thread) -> Frame | None:
    """The frame whose statement takes the lock the thread waits on (its source says
    ``with X:`` or ``X.acquire()`` at that line), below the locking plumbing it calls."""
    for frame in thread.frames:
        if frame.native:
            continue
        if frame.takes is not None:
            return frame
        if not frame.file or not any(m in frame.file for m in _LIB):
            return None
    return None


def taking_frames(thread: Thread) -> list[Frame]:
    """:func:`taking_frame`, then each caller whose own line is the acquire call that called
    it: a wrapper such as logging's ``Handler.acquire`` takes ``self.lock`` for its caller's
    ``self.acquire()``, and the holder's source names the lock as the caller does (``self``,
    inside the acquire()/try/finally release region)."""
    first = taking_frame(thread)
    if first is None:
        return []
    python = [f for f in thread.frames if not f.native]
    out = [first]
    for caller in python[python.index(first) + 1:] if first in python else ():
        callee = out[-1]
        if caller.takes is None or callee.name.rsplit(".", 1)[-1] not in caller.calls:
            break
        out.append(caller)
    return out


def held_locks(proc: Process) -> dict[LockKey, list[tuple[Thread, Frame]]]:
    """Each lock some thread of ``proc`` is inside a block holding, with those threads and the
    outermost frame of each that holds it (one pass over the stacks)."""
    out: dict[LockKey, list[tuple[Thread, Frame]]] = {}
    for thread in proc.threads:
        outer: dict[LockKey, Frame] = {}
        for f in thread.frames:
            for text in f.holds if not f.native else ():
                outer[lock_key(f, text)] = f  # innermost first: the last one is outermost
        for key, f in outer.items():
            out.setdefault(key, []).append((thread, f))
    return out


def _held_edge(proc: Process, thread: Thread,
               held: dict[LockKey, list[tuple[Thread, Frame]]]) -> WaitEdge | None:
    """A lock waiter -> the one thread whose stack is inside a block holding that lock."""
    frames = [f for f in taking_frames(thread) if f.takes is not None]
    if not frames:
        return None
    # The innermost name some thread holds: the wrapper's own lock text, else its caller's.
    frame = next((f for f in frames if held.get(lock_key(f, f.takes or ""))), frames[0])
    assert frame.takes is not None
    holders = held.get(lock_key(frame, frame.takes), [])
    there = frame.takes  # the lock's text where its holder took it
    if not holders:
        there, holders = _handed(held, frame.takes)
    mine = next((f for t, f in holders if t.tid == thread.tid), None)
    others = [(t, f) for t, f in holders if t.tid != thread.tid]
    # One holder or none: the same name held by two threads is two objects (a lock per
    # instance, a recursive walk over nodes), and which one this thread wants is unknown.
    if len(holders) != 1:
        return None
    holder, where = (thread, mine) if mine is not None else others[0]
    # The lock as the innermost frame names it (``self.lock`` at Handler.acquire), the hold
    # as the holder's source does (the caller's ``self.acquire()`` ... release region).
    inner = frames[0]
    site = f"{inner.name} ({inner.short_file}:{inner.line})"
    held_at = f"{where.name} ({where.short_file}:{where.line})"
    who_holds = "its own outer frame" if holder.tid == thread.tid else \
        f"thread {holder.name or holder.tid}"
    how = f"is inside a block holding {there}" + (
        "" if there == frame.takes else f" (the same name as {frame.takes}: a lock handed "
        "to an object)")
    if frame is not inner:
        callee = frames[frames.index(frame) - 1].name.rsplit(".", 1)[-1]
        how = f"is past {frame.takes}.{callee}() and before its release"
    return WaitEdge(proc.pid, thread.tid, "py_lock", f"{inner.takes} (taken at {site})",
                    f"the source: {who_holds} {how} at {held_at}", to_pid=proc.pid,
                    to_tid=holder.tid, probable=True)


def _handed(held: dict[LockKey, list[tuple[Thread, Frame]]], takes: str
            ) -> tuple[str, list[tuple[Thread, Frame]]]:
    """The lock a waiter names ``state_lock`` held by one thread as ``self.state_lock`` (or
    the other way round): a lock handed to an object's constructor and kept as an attribute
    (a snapshot thread's). One such hold or none."""
    name = takes.rsplit(".", 1)[-1]
    found = [(key[2], holders) for key, holders in held.items()
             if key[2] != takes and key[2].rsplit(".", 1)[-1] == name
             and ("." in key[2]) != ("." in takes)]
    return found[0] if len(found) == 1 else (takes, [])


def py_lock_edges(proc: Process) -> Iterator[WaitEdge]:
    """Lock waiters -> the thread inside a block that holds their lock (the source's with-
    blocks); else threads waiting at one lock site -> the one thread inside that function
    past it."""
    sites: dict[tuple[str | None, str, int | None], list[Thread]] = {}
    held = held_locks(proc)
    for thread in proc.threads:
        if not waits_on_lock(thread) or import_lock_wait(thread) is not None:
            continue  # (an import lock's holder is read from importlib's frames)
        edge = _held_edge(proc, thread, held)
        if edge is not None:
            yield edge
        elif (frame := user_frame(thread)) is not None:
            sites.setdefault((frame.file, frame.name, frame.line), []).append(thread)
    if not sites:
        return
    # Where each function of the waiters' sites is on every other thread's stack, in one pass
    # over the stacks (a 1,000-thread process: not once per site).
    wanted = {(file, name) for file, name, _ in sites}
    found: dict[tuple[str | None, str], dict[int, tuple[Thread, int | None]]] = {}
    for thread in proc.threads:
        if thread.python:
            for f in thread.frames:
                if not f.native and (f.file, f.name) in wanted:
                    found.setdefault((f.file, f.name), {}).setdefault(thread.tid, (thread, f.line))
    for (file, name, line), waiters in sites.items():
        waiting = {t.tid for t in waiters}
        inside = [t for tid, (t, at) in found.get((file, name), {}).items()
                  if tid not in waiting and at != line]
        if len(inside) != 1:
            continue
        holder = inside[0]
        where = next(f for f in holder.frames if f.file == file and f.name == name)
        site = f"{name} ({(where.short_file or '?')}:{line})"
        for thread in waiters:
            yield WaitEdge(proc.pid, thread.tid, "py_lock", f"the lock taken at {site}",
                           f"probable holder: the only other thread inside {name} past "
                           f"that line (at line {where.line})", to_pid=proc.pid,
                           to_tid=holder.tid, probable=True)


def _importlib(frame: Frame) -> bool:
    return not frame.native and "importlib" in (frame.file or "") and "_bootstrap" in (
        frame.file or "")


def import_lock_wait(thread: Thread) -> Frame | None:
    """The ``_ModuleLock.acquire`` frame of a thread waiting for a module's import lock: it
    imports (or touches a half-imported) module whose body another thread is running."""
    for frame in thread.frames:
        if frame.native:
            continue
        if _importlib(frame) and frame.name.endswith("_ModuleLock.acquire"):
            return frame
        if not _importlib(frame):
            return None
    return None


def _importing(thread: Thread) -> Frame | None:
    """The innermost module body a thread runs inside an import (the ``<module>`` frame that
    importlib's ``exec_module`` called): it holds that module's import lock until it ends."""
    python = [f for f in thread.frames if not f.native]
    for k, frame in enumerate(python[:-1]):
        if frame.name == "<module>" and _importlib(python[k + 1]):
            return frame
    return None


def import_lock_edges(proc: Process) -> Iterator[WaitEdge]:
    """A thread waiting for a module's import lock -> the other threads of its process inside
    an import, which hold their module's lock until its body ends (cpython#125037: a module
    body that joins a thread importing it; importlib's deadlock detection sees only lock
    cycles, never a join)."""
    waiters = [t for t in proc.threads if blocked(t) and import_lock_wait(t) is not None]
    if not waiters:
        return
    bodies = [(t, body) for t in proc.threads if (body := _importing(t)) is not None]
    for thread in waiters:
        holders = [(t, body) for t, body in bodies if t.tid != thread.tid]
        # The import statement: the first frame outside importlib's own.
        inner = next((f for f in thread.frames if not f.native and not _importlib(f)), None)
        site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
        for holder, body in holders:
            yield WaitEdge(proc.pid, thread.tid, "py_lock",
                           f"the import lock of {body.short_file}",
                           f"its import{site}; thread {holder.name or holder.tid} is importing "
                           f"it: it runs that module's body, at <module> ({body.short_file}:"
                           f"{body.line}), and holds its lock until the body ends",
                           to_pid=proc.pid, to_tid=holder.tid, probable=len(holders) > 1)


def join_edges(proc: Process) -> Iterator[WaitEdge]:
    """A thread joining at exit (``threading._shutdown``, multiprocessing's finalizers
    joining a queue's feeder) -> the other live Python threads of its process."""
    for thread in proc.threads:
        if thread.category is not Category.LOCK or not joins(thread) or not blocked(thread):
            continue
        # A helper counts: a queue's feeder thread is one, and it is what the join waits for;
        # the program's own threads first, the ones an explicit join() names.
        for other in sorted(proc.threads, key=lambda t: t.helper):
            if other.tid != thread.tid and other.python and other.frames:
                yield WaitEdge(proc.pid, thread.tid, "thread", f"thread {other.name or other.tid}",
                               "Thread.join in its stack; the process's other live threads",
                               to_pid=proc.pid, to_tid=other.tid, probable=True)


def library_thread(thread: Thread) -> bool:
    """A thread a library started and runs alone: no Python frame of it is the program's
    (Ray's ``PythonGCThread`` waiting for its next collection trigger). It waits as its
    library designed, on an event only that library sets: no party to the program's own
    notifies."""
    python = [f for f in thread.frames if not f.native]
    return bool(python) and all(in_library(f.file) for f in python)
