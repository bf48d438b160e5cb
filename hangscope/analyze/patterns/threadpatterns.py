"""The patterns of threads inside one process: a lock-order ring (ABBA), a thread waiting on
a lock its own outer frame holds, an event loop blocked on its own future, a wait whose
producer thread is gone, a lock inherited locked across fork (a library's thread pool's too:
frameworks/native.py). Pure, over the wait-for graph (analyze/graph/waitwalk.py);
analyze/patterns/waitpatterns.py places them in its ordered table.
"""

from __future__ import annotations

from hangscope.analyze.evidence.locks import polls_filelock
from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.analyze.evidence.working import notified_frames, notified_wait
from hangscope.analyze.graph.loopedges import idle_loop, loop_index, own_frames
from hangscope.analyze.graph.threadedges import blocked as _blocked
from hangscope.analyze.graph.threadedges import (
    executor_worker,
    held_locks,
    joins,
    lock_key,
    runs_task,
    taking_frame,
    user_frame,
    waits_on_lock,
)
from hangscope.analyze.graph.waitwalk import Graph, hop, site_words, thread_words, waits_into
from hangscope.analyze.patterns.behind import behind, collective_behind
from hangscope.analyze.patterns.ends.grpcpool import callback_self_wait
from hangscope.frameworks.native import fork_pool, native_call, native_words, pool_words
from hangscope.model import Category, Frame, Process, Thread
from hangscope.model.waits import WaitPattern
from hangscope.words import who, who_list, who_many


def lock_ring(g: Graph, ring: list[int]) -> WaitPattern:
    """Threads of one process, each holding the lock the next one wants (ABBA)."""
    pid = g.edges[ring[0]].pid
    proc = g.procs[pid]
    parts = []
    for i in ring:
        edge = g.edges[i]
        me = g.threads.get((pid, edge.tid))
        wants = edge.object.split(" (taken at ", 1)
        held = [f"{g.edges[j].object.split(' (taken at ', 1)[0]}" for j in ring
                if g.edges[j].to_tid == edge.tid]
        site = f" at {wants[1][:-1]}" if len(wants) > 1 else site_words(me)
        holds = f"holds {', '.join(held)} and " if held else ""
        parts.append(f"thread {me.name if me and me.name else edge.tid} {holds}waits for "
                     f"{wants[0]}{site}")
    ring_tids = {g.edges[i].tid for i in ring}
    behind = {e.tid for e in g.edges if e.kind == "py_lock" and e.pid == pid
              and e.to_tid in ring_tids and e.tid not in ring_tids}
    clients = sorted({e.pid for e in g.edges if e.to_pid == pid and e.pid != pid
                      and e.kind in ("unix", "tcp", "pipe", "fifo", "store")})
    tail = ""
    if behind:
        n = len(behind)
        tail += f"; {n} more thread{'s wait' if n > 1 else ' waits'} behind them"
    if clients:
        tail += "; " + ", ".join(who(g.procs[c]) for c in clients[:4]) + (
            " wait" if len(clients) > 1 else " waits") + " for it"
    chain = (f"lock-order inversion in {who(proc)}: " + "; ".join(parts) + tail
             + ": take the locks in the same order in every thread")
    first = g.edges[ring[0]]
    return WaitPattern("lock_ring", (pid, *clients), chain, tuple(ring), pid, first.tid)


def self_lock(g: Graph) -> WaitPattern | None:
    """A thread waits for a non-reentrant lock that an outer frame of its own stack holds."""
    for i, edge in enumerate(g.edges):
        if edge.kind != "py_lock" or edge.to_tid != edge.tid:
            continue
        proc = g.procs[edge.pid]
        thread = g.threads.get((edge.pid, edge.tid))
        if thread is None or not _blocked(thread):
            continue
        taking = taking_frame(thread)
        python = [f for f in thread.frames if not f.native]
        text = edge.object.split(" (taken at ", 1)[0]
        holder = next((f for f in reversed(python) if f is not taking and text in f.holds),
                      taking)
        frames = python[python.index(taking) if taking in python else 0:]
        below = frames[1] if len(frames) > 1 else None
        held_at = f"{holder.name} ({holder.short_file}:{holder.line})" if holder else "?"
        how = ""
        if below is not None and taking is not None and below.calls and \
                taking.name.rsplit(".", 1)[-1] not in below.calls:
            # The caller's line calls no function of that name: the frame was not called
            # from it but run over it, as CPython runs a signal handler on the main thread.
            how = (f"; {taking.name} runs on top of {below.name} ({below.short_file}:"
                   f"{below.line}), whose line does not call it: a signal handler that "
                   f"interrupted the thread inside the block holding {text}")
        chain = (f"{thread_words(proc, thread)} deadlocks itself: it waits for {text} at "
                 f"{taking.name if taking else '?'} ({taking.short_file if taking else '?'}:"
                 f"{taking.line if taking else '?'}), which its own outer frame {held_at} holds "
                 f"and cannot release until this wait returns{how}; a threading.Lock is not "
                 "reentrant: do not take it in a signal handler or callback (set a flag, or "
                 "use an RLock)")
        return WaitPattern("self_lock", (proc.pid,), chain, (i,), proc.pid, thread.tid)
    return None


def _forked(proc: Process, parent: Process | None) -> bool:
    """A fork without exec: multiprocessing's fork start method (``popen_fork`` at the bottom
    of the child's stack: the parent's frames, copied), not its spawn or forkserver (a fresh
    interpreter: ``spawn_main``); else the parent's stack address, and only where either
    address is unread the parent's command line (an exec'd one may repeat it)."""
    if parent is None or any("--multiprocessing-fork" in a or "spawn_main" in a
                             for a in proc.cmdline):
        return False
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    if main is not None and any(not f.native and (f.file or "").endswith(
            "multiprocessing/popen_fork.py") for f in main.frames):
        return True
    # A child that set its own title (setproctitle) after os.fork(): its stack starts where
    # its parent's does (ASLR places an exec'd program's elsewhere).
    if proc.stack_start is not None and parent.stack_start is not None:  # apart: exec'd,
        return proc.stack_start == parent.stack_start  # as Lightning's rank 1 (same argv)
    return bool(proc.cmdline) and proc.cmdline == parent.cmdline


def _bystander(thread: Thread) -> bool:
    """A thread of a forked child that cannot hold the inherited lock: a helper (a queue's
    feeder, pin memory), a native-only thread, one idling for work in an Event/Condition/Queue
    wait, or one blocked elsewhere whose source holds no lock (it started in the child, after
    the fork, and took none)."""
    return thread.helper or not thread.python or notified_wait(thread) is not None or (
        thread.category in (Category.IDLE, Category.IPC_WAIT, Category.SLEEP)
        and not any(f.holds for f in thread.frames if not f.native))


def _kernel_lock_wait(g: Graph, thread: Thread) -> bool:
    """The thread waits on a kernel lock (flock, fcntl: /proc/locks names its holder), not
    on an in-process one (a Python lock, a pthread mutex: both a futex). The wchan says so
    even when the holder was not found (``locks_lock_inode_wait``, ``flock_lock_inode_wait``);
    a kernel that hides wchans ("0") leaves the file-lock edge to say it."""
    if any(e.kind == "file_lock" and e.tid == thread.tid for e in g.edges):
        return True
    wchan = thread.wchan or ""
    return wchan.startswith("locks_") or "flock" in wchan or "posix_lock" in wchan


def fork_lock(g: Graph) -> WaitPattern | None:
    found: list[tuple[Process, Process, Thread]] = []
    for proc in g.main_locked:  # (live, its main thread's category LOCK: asked again below)
        threads = proc.threads  # the main thread is the first, most often: no scan
        main = threads[0] if threads and threads[0].tid == proc.pid else next(
            (t for t in threads if t.tid == proc.pid), None)
        # The forking thread's copy is the child's main thread: the one the lock wait is on
        # (its category first, as waits_on_lock asks: most ranks wait on no lock).
        if main is None or main.category is not Category.LOCK or not _blocked(main) or not \
                waits_on_lock(main) or not _forked(proc, parent := g.procs.get(proc.ppid or 0)):
            continue
        if _kernel_lock_wait(g, main) or polls_filelock(proc):
            continue  # a file lock's holder is a process (/proc/locks), not a lost thread
        inner = next((f for f in main.frames if not f.native), None)
        if inner is not None and (inner.file or "").endswith("multiprocessing/synchronize.py"):
            # A multiprocessing SemLock is a semaphore shared by every process that holds it
            # (a forked sibling reading the same Queue holds its read lock): fork copies no
            # holder thread of it, so nothing is stranded.
            continue
        others = [t for t in proc.threads if t.tid != main.tid]
        if not all(_bystander(t) for t in others):
            continue
        taking = taking_frame(main)
        if taking is not None and taking.takes is not None and any(
                t.tid == main.tid for t, _ in held_locks(proc).get(
                    lock_key(taking, taking.takes), [])):
            continue  # its own outer frame holds it: a self-deadlock (_self_lock)
        assert parent is not None
        found.append((proc, parent, main))
    if not found:
        return None
    proc, parent, thread = found[0]
    frame = next((f for f in thread.frames if not f.native and f.takes), None) or next(
        (f for f in thread.frames if not f.native), None)
    where = f" at {frame.name} ({frame.short_file}:{frame.line})" if frame else ""
    lock = f" {frame.takes}" if frame is not None and frame.takes else ""
    call = native_call(thread.frames) if not lock else None
    pool = fork_pool(call)
    # Every parent's children in the same wait where it is a library's pool (each rank forked
    # its DataLoader workers after using it); else the first parent's, as its lock is its own.
    siblings = [p for p, par, t in found if par.pid == parent.pid or (
        pool is not None and fork_pool(native_call(t.frames)) is pool)]
    kids = {p.pid for p in siblings}
    parents = list({par.pid: par for p, par, _ in found if p.pid in kids}.values())
    one = len(siblings) == 1
    them = who_list(siblings)
    helpers = [t for p in siblings for t in p.threads if t.tid != p.pid]
    child = "the child has" if one else "each child has"
    threads = (f"{child} no other thread that could hold it" if not helpers else
               f"{child} only helper threads besides, started after the fork, that cannot "
               "hold it")
    chain = (f"{them}, forked from {who_many(parents)} without exec, "
             f"{'waits' if one else 'wait'} on the lock{lock}{where}{native_words(call)}, "
             + (pool_words(pool, who_many(parents), len(parents), one) if pool is not None else
                f"inherited locked across fork: the thread that held it when {parent.pid} "
                f"forked exists only in {parent.pid}, and {threads}, so nothing can release "
                "it; do not fork while holding a lock (start children with 'spawn' or "
                "'forkserver', or outside the critical section)"))
    waiting = [q for q in parents if any(e.pid == q.pid and e.to_pid in kids for e in g.edges)]
    if waiting:
        chain += f"; {who_many(waiting)} {'waits' if len(waiting) == 1 else 'wait'} for " \
                 f"{'it' if one else 'them'}"
    return WaitPattern("fork_lock", (*kids, *(par.pid for par in parents)), chain, (),
                       proc.pid, thread.tid, tuple(p.pid for p in siblings[1:]))


_FUTURE = ("concurrent/futures/_base.py",)


_FUTURE_CALLS = ("result", "exception", "wait")


def future_wait(thread: Thread, calls: tuple[str, ...] = _FUTURE_CALLS) -> Frame | None:
    """The ``concurrent.futures`` frame (``Future.result``, ``wait``...) a thread blocks in."""
    if calls is _FUTURE_CALLS:
        return _future_frame(thread.frames)
    return _future_in(thread.frames, calls)


def _future_in(frames: tuple[Frame, ...], calls: tuple[str, ...]) -> Frame | None:
    return next((f for f in frames if not f.native and (f.file or "").endswith(_FUTURE)
                 and f.name.rsplit(".", 1)[-1] in calls), None)


@per_stack  # asked of every thread of every rank: once per distinct stack
def _future_frame(frames: tuple[Frame, ...]) -> Frame | None:
    return _future_in(frames, _FUTURE_CALLS)


def program_threads(proc: Process) -> list[Thread]:
    """The threads that run the program's Python: no helper, unless a pool worker that runs a
    task (an idle executor worker waits for work, as helpers always do)."""
    return [t for t in proc.threads if t.python and (not t.helper or runs_task(t))]


def could_produce(thread: Thread) -> bool:
    """A thread that could set an event, fill a queue or complete a future: any thread of the
    process that is not itself idling in such a wait (an executor's idle worker waits on its
    queue; one blocked in recv may be computing the result)."""
    return (not thread.helper or runs_task(thread)) and thread.python \
        and notified_wait(thread) is None and not joins(thread)


def self_wait(g: Graph) -> WaitPattern | None:
    """An asyncio loop's thread blocks on a concurrent future that no other thread is
    working on: its work is scheduled on this loop (``run_coroutine_threadsafe``), which
    cannot run it until the wait returns. Or gRPC's channel thread, blocked in a done-callback
    on a response that only it delivers (ends/grpcpool.callback_self_wait)."""
    found = callback_self_wait(g)
    if found is not None:
        return found
    for proc in g.having(_future_frame):  # (a thread blocked on a future: none elsewhere)
        for thread in proc.threads:
            if proc.is_exited or not _blocked(thread) or thread.category is not Category.LOCK:
                continue
            waits = future_wait(thread)
            if waits is None:
                continue
            python = own_frames(thread)
            loop = loop_index(thread)
            if loop is None or python.index(waits) > loop:
                continue
            if any(t.tid != thread.tid and runs_task(t) and _blocked(t) and future_wait(t)
                   for t in proc.threads):
                continue  # a pool task that waits on this loop: the cycle through it says it
            others = [t for t in proc.threads if t.tid != thread.tid and could_produce(t)]
            sides = [t for t in others if idle_loop(t)]
            if len(sides) != len(others):
                continue  # another thread may be computing it: a blocked loop, not a self-wait
            inner = user_frame(thread)
            site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
            me = f"the asyncio event loop of {who(proc)} (thread {thread.name or thread.tid})"
            if sides:
                names = ", ".join(str(t.name or t.tid) for t in sides)
                chain = (f"{me} waits for itself: it blocks synchronously in concurrent."
                         f"futures.Future.result(){site}, on a coroutine it sent to the loop of "
                         f"thread {names}, which sleeps in its selector: that coroutine awaits "
                         "something, and nothing else runs, so what it awaits is what the "
                         "blocked loop would do (an asyncio.Event it sets, a task it runs); "
                         "await asyncio.wrap_future(future) instead of blocking on it")
            else:
                chain = (f"{me} waits for itself: it blocks synchronously in concurrent."
                         f"futures.Future.result(){site}, and no other thread of the process "
                         "runs anything that could complete that future: its coroutine is "
                         "scheduled on this same loop (asyncio.run_coroutine_threadsafe on the "
                         "loop's own thread), which cannot run it until the wait returns; await "
                         "the coroutine instead of blocking on its future")
            return WaitPattern("self_wait", (proc.pid,), chain, (), proc.pid, thread.tid)
    return None



def died_threads(proc: Process) -> list[str]:
    """Threads the process's output says died: threading.excepthook's ``Exception in thread
    NAME:`` line (the thread's traceback follows it)."""
    lines = [*proc.log_errors, *proc.log_tail]
    names = [line.split("Exception in thread ", 1)[1].rstrip(":").strip()
             for line in lines if line.startswith("Exception in thread ")]
    return list(dict.fromkeys(n for n in names if n))


def orphan_wait(g: Graph) -> WaitPattern | None:
    """A thread waits for another thread of its process to set an Event, put on a queue or
    complete a future, and none is left that could: the producer died (its traceback in the
    output), or every other thread waits too."""
    for proc in g.having(notified_frames):  # (a thread waits to be notified: none elsewhere)
        if proc.is_exited:
            continue
        # The working thread first: a main thread in Queue.join() is what the job waits on,
        # its workers idle in Queue.get() only wait for more work.
        for thread in sorted(proc.threads, key=lambda t: t.tid != proc.working_tid):
            frame = notified_wait(thread)
            if frame is None or (thread.helper and not runs_task(thread)) or not _blocked(
                    thread) or any("/asyncio/" in (f.file or "") for f in thread.frames
                                   if not f.native):
                continue
            others = [t for t in program_threads(proc) if t.tid != thread.tid]
            died = died_threads(proc)
            live_names = {t.name for t in proc.threads}
            gone = [n for n in died if n not in live_names]
            busy = any(could_produce(t) for t in others)
            if busy and not (
                    gone and thread.tid == proc.working_tid and all(_blocked(t) for t in others)):
                # another thread runs or waits on something else: it may set it (unless the
                # output says the one that would died, and every other thread is blocked)
                continue
            waiters, into = waits_into(g, proc.pid)
            inner = user_frame(thread)
            site = f" at {inner.name} ({inner.short_file}:{inner.line})" if inner else ""
            what = frame.name
            if executor_worker(thread) and what.endswith(("result", "exception")) and not any(
                    e.pid == proc.pid and e.tid == thread.tid and e.kind == "loop"
                    for e in g.edges):  # a future of the loop's: the loop completes it
                return _pool_self_wait(g, proc, thread, what + site, others, waiters)
            futureless = _futureless(proc, frame)
            if not died and not futureless:
                # No producer seen dying: an Event nobody sets is also how a daemon idles on
                # purpose (``Event().wait()`` for ever); what waits on it is then a chain's
                # end, which the sink states with the process's own stack. A future is no
                # daemon's idle wait: with no loop and no pool left to complete it, it is lost.
                continue
            rest = "no other thread of it is left" if not others else (
                f"its {len(others)} other thread{'s wait' if len(others) > 1 else ' waits'} "
                "too" + ("" if not busy else
                         " (elsewhere: " + ", ".join(
                             f"{t.name or t.tid} at {t.site or '?'}" for t in others[:3]) + ")"))
            draining = what.endswith("Queue.join")
            chain = (f"{thread_words(proc, thread)} waits in {what}{site} for another thread "
                     f"to set it, and {rest}: the producer is gone") if not draining else (
                f"{thread_words(proc, thread)} waits in {what}{site} for task_done() of "
                f"every task taken from the queue, and {rest} (for more work): a task "
                "taken will never be marked done")
            if futureless and not died:
                chain = (f"{thread_words(proc, thread)} waits in {what}{site} for a "
                         f"concurrent future, and {rest}: no thread of {who(proc)} runs an "
                         "asyncio event loop or a pool worker that could complete it (a "
                         "run_coroutine_threadsafe future whose loop stopped, or whose loop "
                         "thread ended, is never done)")
            if died:
                chain += (f"; its output says thread {', '.join(died[:3])} died of an "
                          "exception (threading's 'Exception in thread' traceback), before "
                          + ("it could call task_done()" if draining else "it could set it"))
            # Who waits behind it, each chain from its start, in its own words (a supervisor
            # joining a worker that waits on it); else the first edge of each waiter onto it.
            chain += behind(g, (proc.pid,)) or ("; " + "; ".join(hop(g, i) for i in into)
                                                + collective_behind(g, waiters) if into else "")
            chain += ("; call task_done() in a finally (and catch BaseException in the "
                      "worker loop)" if draining else "; wait with a timeout and check the "
                      "producer thread is_alive(), or set the event in a finally")
            return WaitPattern("orphan_wait", (proc.pid, *waiters), chain, tuple(into),
                               proc.pid, thread.tid)
    return None


def _futureless(proc: Process, frame: Frame) -> bool:
    """A ``concurrent.futures`` Future.result() in a process where nothing could complete it:
    no thread runs an asyncio loop, a thread-pool worker or a process pool's manager."""
    if not (frame.file or "").endswith("concurrent/futures/_base.py") or not frame.name.endswith(
            ("result", "exception")):
        return False
    return not any(loop_index(t) is not None or executor_worker(t) or any(
        not f.native and (f.file or "").endswith("concurrent/futures/process.py")
        for f in t.frames) for t in proc.threads)


def _pool_self_wait(g: Graph, proc: Process, thread: Thread, where: str, others: list[Thread],
                    waiters: list[int]) -> WaitPattern:
    """A pool worker waits on a future of its own pool with no worker left to run it."""
    idle = f"its {len(others)} other threads wait too" if others else \
        "no other thread of the process is left"
    chain = (f"{thread_words(proc, thread)}, a ThreadPoolExecutor worker, waits in {where} on a "
             f"future that no thread can run: {idle}, so the task it waits for is queued "
             "behind the one this worker runs (it waits for itself); do not wait on the "
             "pool's futures from inside its tasks, or give it more workers")
    if waiters:
        chain += "; " + ", ".join(who(g.procs[w]) for w in waiters[:3]) + (
            " wait" if len(waiters) > 1 else " waits") + f" for {who(proc)}"
    return WaitPattern("orphan_wait", (proc.pid, *waiters), chain, (), proc.pid, thread.tid)
