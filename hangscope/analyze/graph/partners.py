"""Which of several holders of one wait's other end to follow first: the likely partner.

Pure, over the wait-for edges. fork copies every fd: the other end of a pipe or a socketpair a
parent made before starting its workers is held by the parent and by every worker, though one
of them is the one a conversation is with. The kernel cannot say which; how each holder waits
can.
"""

from __future__ import annotations

from dataclasses import replace

from hangscope.model import Category, Thread
from hangscope.model.waits import WaitEdge

#: Library loops whose read waits for the next task: a worker idle between tasks.
_WORKER_LOOPS = (("torch/utils/data/_utils/worker.py", "_worker_loop"),
                 ("multiprocessing/pool.py", "worker"),
                 ("concurrent/futures/process.py", "_process_worker"))


def idle_worker(thread: Thread | None) -> bool:
    """A pool or DataLoader worker waiting in its library's loop for its next task."""
    return thread is not None and any(
        not f.native and (f.file or "").endswith(path) and f.name.rsplit(".", 1)[-1] == name
        for f in thread.frames for path, name in _WORKER_LOOPS) and thread.category in (
        Category.IPC_WAIT, Category.LOCK, Category.IDLE)


def likely_partner_first(edges: list[WaitEdge],
                          threads: dict[tuple[int, int], Thread]) -> list[WaitEdge]:
    """Where a thread's one wait leads to several processes (the other end of a pipe or a
    socketpair that fork copied into a parent and its children), the likely partner first: a
    holder that waits back on the waiter's process (a lock it holds, a reply: the cycle's
    other side); then one blocked elsewhere (it may be the writer, held up); then a worker
    idle in its library's task loop, which waits back only for its next task; last a parent
    that only waits for the waiter to exit. Stable otherwise."""
    back: dict[tuple[int, int], int] = {}
    for e in edges:
        if e.to_pid is None or e.to_pid == e.pid:
            continue
        how = 3 if e.kind == "child" else 2 if idle_worker(threads.get((e.pid, e.tid))) else 0
        key = (e.pid, e.to_pid)
        back[key] = min(back.get(key, how), how)
    first: dict[tuple[int, int | None, str, str], int] = {}
    for k, e in enumerate(edges):
        first.setdefault((e.pid, e.tid, e.kind, e.object), k)

    def rank(item: tuple[int, WaitEdge]) -> tuple[int, int, int]:
        k, e = item
        partner = back.get((e.to_pid, e.pid), 1) if e.to_pid is not None else 1
        return first[(e.pid, e.tid, e.kind, e.object)], partner, k

    return [e for _, e in sorted(enumerate(edges), key=rank)]


_CALLS = frozenset({Category.IPC_WAIT, Category.LOCK, Category.IO})


def _blocked_elsewhere(thread: Thread) -> bool:
    """A program thread blocked on a call (not idle in accept or a select loop, not asleep)."""
    leaf = next((f for f in thread.frames if not f.native), None)
    return (thread.python and not thread.helper and thread.category in _CALLS
            and not (leaf is not None and leaf.name.rsplit(".", 1)[-1] in ("accept", "select")))



def to_handler(edges: list[WaitEdge], threads: dict[tuple[int, int], Thread],
               working: dict[int, int | None]) -> list[WaitEdge]:
    """A request to a server whose thread on that connection could not be found (none is
    blocked on it) leads to the one thread of the server blocked on a call of its own, when
    its working thread idles and no other thread of it is blocked: the handler serving the
    request (``working``: pid -> the working thread's tid). Probable: the kernel does not say
    which thread serves which connection."""
    out_of: dict[int, set[int]] = {}
    for e in edges:
        if e.kind != "child":
            out_of.setdefault(e.pid, set()).add(e.tid)
    blocked: dict[int, list[int]] = {}
    for (pid, tid), thread in threads.items():
        if tid != working.get(pid) and _blocked_elsewhere(thread):
            blocked.setdefault(pid, []).append(tid)
    routed = []
    for e in edges:
        to = e.to_pid
        if e.kind in ("tcp", "unix") and e.to_tid is None and to is not None and to != e.pid \
                and working.get(to) not in out_of.get(to, set()) \
                and len(blocked.get(to, [])) == 1 and blocked[to][0] in out_of.get(to, set()):
            tid = blocked[to][0]
            e = replace(e, to_tid=tid, probable=True, how=(
                f"{e.how}; thread {tid} is the only thread of PID {to} blocked on a call of "
                "its own while its main thread idles: the handler of this request, "
                "probably"))
        routed.append(e)
    return routed
