"""Does a process that others wait for work, or spin? A pure reading of the progress window.

A rank the others wait for in a collective is a straggler only if it will never arrive: it
is blocked elsewhere, or spins in a loop that cannot end. One that works (rank 0 tokenising a
dataset behind ``main_process_first`` while the others sit in a barrier: LongLoRA#45,
axolotl#2684) makes the job slow, not hung. The window tells them apart:

- its GPU's kernels do work (GPM), or its waits complete while data moves (counters): work;
- its Python stack moved through more than one chain of *functions* (calls are made and
  return: an encoder, a tokeniser, a loader), or the thread read or wrote data (log lines,
  cache shards): work;
- it moved only between lines of one loop of one function, with no call and no I/O (``while
  padded % 8: padded += 16``): a spin that may never end, still a straggler.

And does a process wait on one that works? A Ray driver looping ``ray.get(actor.step.remote())``
blocks until the actor returns, so its own window is one stack woken again and again, a timed
poll by itself. Followed through its wait-for edges (an ``object`` edge to the actor's process,
a pipe to its writer), the wait ends at a process whose window shows work: slow at worst.
"""

from __future__ import annotations

import itertools
import re

from hangscope.analyze.evidence.progress import MIN_MOVED_SAMPLES, MIN_WAKES, PROGRESSING, SLOW
from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.stackmemo import per_stack
from hangscope.frameworks import does_work, helper_role
from hangscope.model import Frame, Process, Snapshot, Thread
from hangscope.model.progress import Newcomer, ProcessProgress, RankProgress, ThreadProgress
from hangscope.words import size

_LINE = re.compile(r":\d+\)$")
_INLINE = re.compile(r"<(?:genexpr|listcomp|dictcomp|setcomp|lambda)> \(")
#: Native libraries whose frames under a Python line are arithmetic (BLAS/LAPACK, OpenMP,
#: torch's CPU kernels, NumPy's loops): a thread on CPU in them computes. Waiting libraries
#: (libcuda, libnccl, libc, libpython) are not here: their spins are waits (classify.py).
_MATH = ("libtorch_cpu", "blas", "lapack", "libmkl", "libgomp", "libiomp", "libomp",
         "_multiarray_umath", "dnnl", "faiss", "libopenblas")
#: On CPU this share of the window at least (a loaded machine gives a computing thread less
#: than a core), and it never blocked of its own accord (at most this many voluntary
#: switches: a thread that sleeps or waits in between is not one long native call).
_BUSY_SHARE = 0.3
_MAX_VOLUNTARY = 3


def raw_window(snap: Snapshot, proc: Process) -> ProcessProgress | None:
    """The watcher's raw window of this process (its node's readings; None: not watched)."""
    found = [p for r in snap.readings if r.progress is not None
             and (r.host is None or proc.host is None or r.host == proc.host)
             for p in r.progress.processes if p.pid == proc.pid]
    return found[0] if len(found) == 1 else None


def window_thread(raw: ProcessProgress, measured: RankProgress) -> ThreadProgress | None:
    """The thread of the raw window the decision judged (its main thread where none)."""
    tid = measured.tid if measured.tid is not None else raw.pid
    return next((t for t in raw.threads if t.tid == tid), None)


def _call_chains(thread: ThreadProgress) -> int:
    """Distinct chains of functions (lines dropped) sampled at least MIN_MOVED_SAMPLES times
    in all: a loop inside one function is one chain whatever line it is on."""
    counts: dict[tuple[str, ...], int] = {}
    for stack in thread.stacks:
        # A comprehension or generator expression runs inline in its function's loop: no
        # call of the program's (a torn sample may hold it alone: dropped).
        chain = tuple(_LINE.sub(")", frame) for frame in stack.frames
                      if not _INLINE.search(frame))
        if chain:
            counts[chain] = counts.get(chain, 0) + stack.count
    if len(counts) < 2:
        return len(counts)
    ordered = sorted(counts.values(), reverse=True)
    return len(counts) if sum(ordered[1:]) >= MIN_MOVED_SAMPLES else 1


def work_words(snap: Snapshot, proc: Process, measured: RankProgress | None) -> str | None:
    """What shows that ``proc`` works (``its kernels do work``, ``its Python stack went
    through 6 call chains ... and it wrote 6.6M``); None where the window shows no work (it
    was blocked, spun in one loop, or was not watched)."""
    if measured is None or measured.decision not in (PROGRESSING, SLOW):
        return None
    raw = raw_window(snap, proc)
    thread = window_thread(raw, measured) if raw is not None else None
    if measured.evidence == "sleep":  # its own sentence: where it sleeps, how often it ended
        return measured.reason
    if measured.decision == SLOW or measured.evidence == "source":
        # neither proven: a native library's math still is work; a hot line of a for loop:
        # the library's math under it, where one computes, says more than the loop
        seconds = snap.progress.seconds if snap.progress is not None else 0.0
        native = _native_math(proc, thread, seconds) if thread is not None else None
        return native if measured.decision == SLOW else native or measured.reason
    if measured.evidence == "gpu":
        return measured.reason
    io = thread.io if thread is not None and thread.io is not None else (
        raw.io if raw is not None else None)
    data = None
    if io is not None and io.syscr + io.syscw >= MIN_WAKES:
        moved = " and ".join(f"{verb} {size(amount)}" for verb, amount in
                             (("read", io.rchar), ("wrote", io.wchar)) if amount)
        data = f"it {moved or 'made'} in {io.syscr + io.syscw:,} reads/writes"
    if measured.evidence == "counters":
        return measured.reason if data is None else f"{measured.reason}; {data}"
    if thread is None:
        return None
    chains = _call_chains(thread)
    cpu = (f" ({thread.counters.cpu_ns / 1e9:.1f} s of CPU)"
           if thread.counters is not None and thread.counters.cpu_ns is not None else "")
    moved = (f"its Python stack went through {chains} call chains in {thread.samples} "
             f"samples{cpu}") if chains >= 2 else None
    if moved is None and data is None:
        return None  # one loop of one function, no call, no I/O: a spin, not proven work
    return "; ".join(w for w in (moved, data) if w)


def _native_math(proc: Process, thread: ThreadProgress, seconds: float) -> str | None:
    """``it computes inside torch/lib/libtorch_cpu.so under <module> (x.py:26): 2.0 s of CPU in
    2.0 s``: the working thread ran the whole window inside a math library's native frames,
    below one Python line (a long torch or NumPy call: ``torch.linalg.eigh``). A Python spin
    has no such frames under its line: its loop is bytecode."""
    working = proc.working_thread
    counters = thread.counters
    if working is None or counters is None or counters.cpu_ns is None or seconds <= 0 or \
            counters.cpu_ns < _BUSY_SHARE * seconds * 1e9 or (
                counters.voluntary is not None and counters.voluntary > _MAX_VOLUNTARY):
        return None
    native = list(itertools.takewhile(lambda f: f.native, working.frames))
    lib = next((f for f in native if any(m in (f.file or "") for m in _MATH)), None)
    if lib is None or len(native) == len(working.frames):
        return None
    return (f"it computes inside {lib.short_file} under {working.site or '?'}: "
            f"{counters.cpu_ns / 1e9:.1f} s of CPU in {seconds:.1f} s, in a native math "
            "library's frames (a long torch or NumPy call), not a Python loop")


#: Hops followed at most (a chain longer than this is read no further).
MAX_HOPS = 16


#: How an object edge says the waiter's call is queued behind a method of its producer that
#: loops (analyze/graph/objectedges.py): the producer's work is no progress of that call.
QUEUED_BEHIND = "the call queued behind "


def progressing_pids(snap: Snapshot) -> frozenset[int]:
    """The processes the window measured progressing (none without a window)."""
    ranks = snap.progress.ranks if snap.progress is not None else ()
    return frozenset(r.pid for r in ranks if r.decision == PROGRESSING)


def in_traffic(snap: Snapshot, going: frozenset[int]) -> frozenset[int]:
    """The processes that exchanged data within the window with one that progresses: a TCP
    connection of theirs whose other end a progressing process holds, data through it in both
    directions within a window's length of the kernel's read (``tcp_info``): they serve it or
    are served by it, as it moves (a parameter server whose main thread waits in
    ``rpc.shutdown()`` while its RPC threads apply the trainers' gradients). A one-way trickle
    (a stream the other end no longer reads, a health check's ping unanswered) is not."""
    kernel = snap.waits.kernel if snap.waits is not None else None
    if kernel is None or not going or not kernel.tcp or snap.window_s <= 0:
        return frozenset()
    window_ms = snap.window_s * 1000
    found = {pid for pid, other, conn in kernel.tcp_pairs() if other in going
             and pid not in going and conn.last_sent_ms is not None
             and conn.last_recv_ms is not None
             and max(conn.last_sent_ms, conn.last_recv_ms) <= window_ms}
    return frozenset(found)


def chain_to_work(snap: Snapshot, pid: int) -> tuple[int, ...] | None:
    """The PIDs from ``pid`` (its working thread), edge by edge, to the first process the
    window saw progress; None where its waits lead to none (or it waits on nothing)."""
    graph, going = snap.wait_graph, progressing_pids(snap)
    if graph is None or not going or pid in going:
        return None
    procs = {p.pid: p for p in snap.processes}
    start = procs.get(pid)
    if start is None or start.working_tid is None:
        return None
    # Breadth first from the working thread: a thread that waits on several (a zmq receive,
    # a get on many objects) waits on any of them doing the work. One that waits for a thread
    # of its own to notify it (Event, Condition, Queue) waits on whatever those threads wait
    # on: each of its threads starts a path too (a library's fetcher in ``ray.get``).
    tids = [start.working_tid]
    if start.working_thread is not None and notified_wait(start.working_thread) is not None:
        tids += [t.tid for t in start.threads if t.python and not t.helper
                 and t.tid != start.working_tid]
    frontier: list[tuple[tuple[int, int], tuple[int, ...]]] = [
        ((pid, tid), (pid,)) for tid in tids]
    seen = {(pid, tid) for tid in tids}
    for _ in range(MAX_HOPS):
        onward: list[tuple[tuple[int, int], tuple[int, ...]]] = []
        for (at_pid, at_tid), path in frontier:
            for e in graph.edges:
                if e.pid != at_pid or e.tid != at_tid or e.to_pid is None or e.to_pid == pid \
                        or QUEUED_BEHIND in e.how:
                    continue
                if e.to_pid in going:
                    return (*path, e.to_pid)
                target = procs.get(e.to_pid)
                started = started_at_work(snap, target, going) if target is not None else None
                if started is not None:  # it waits for what it started (a raylet, its workers)
                    return (*path, e.to_pid, started)
                tid = e.to_tid if e.to_tid is not None else (
                    target.working_tid if target is not None else None)
                if tid is not None and (e.to_pid, tid) not in seen:
                    seen.add((e.to_pid, tid))
                    onward.append(((e.to_pid, tid), (*path, e.to_pid)))
        if not onward:
            return None
        frontier = onward
    return None


#: CPU a newcomer must have used since its birth to be at work (not just forked).
MIN_NEWCOMER_CPU_S = 0.05


def starting_workers(snap: Snapshot) -> tuple[Newcomer, ...]:
    """The framework's workers born during the dump (``ProgressEvidence.newcomers``) that
    compute in their start-up: a scheduler placing work (Ray's raylet starting the worker of
    the actor a driver waits on), not a helper's child."""
    return tuple(n for r in snap.readings if r.progress is not None
                 for n in r.progress.newcomers
                 if does_work(n.title) and helper_role(n.title) is None
                 and n.cpu_s >= MIN_NEWCOMER_CPU_S and n.state not in ("Z", "X"))


def started_at_work(snap: Snapshot, proc: Process, going: frozenset[int]) -> int | None:
    """A child of ``proc``, no helper, that the window saw progress, where ``proc`` did not:
    a server idle while the processes it started work (a raylet whose workers start up before
    they connect to it) is waited on for their work."""
    if proc.pid in going:
        return None
    # (asked of every process a chain passes: only children the window saw progress are
    # looked up, not every process of a job of thousands)
    return next((pid for pid in proc.children if pid in going and (
        child := snap.process(pid, proc.host)) is not None
        and child.role not in HELPER_ROLES), None)


#: Plumbing that waits for a thread of the same process: (file suffix, the calls that wait).
_PRODUCED = {"threading.py": ("wait", "wait_for"), "queue.py": ("get", "join"),
             "concurrent/futures/_base.py": ("result", "exception")}


def notified_wait(thread: Thread) -> Frame | None:
    """The frame of a thread-to-thread wait (``Event.wait``, ``Condition.wait``, ``Queue.get``,
    ``Future.result``): a thread of the same process must set, notify, put or complete it."""
    return notified_frames(thread.frames)


@per_stack  # asked of every thread of every rank by several patterns: once per stack
def notified_frames(frames: tuple[Frame, ...]) -> Frame | None:
    python = [f for f in frames if not f.native]
    found = None
    for f in python:  # the outermost plumbing frame: Event.wait over Condition.wait
        file = f.file or ""
        names = next((n for suffix, n in _PRODUCED.items() if file.endswith(suffix)), None)
        if names is None:
            break
        if f.name.rsplit(".", 1)[-1] in names:
            found = f
    return found
