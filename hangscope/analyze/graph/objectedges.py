"""A thread blocked in a framework's get waits for the process that hosts the producer of the
object: wait-for edges (Ray's ``ray.get`` on an actor's result waits for that actor's worker).

The objects a waiter wants come from its frame's locals and its memory (``LocalsRead.objects``,
analyze/evidence/locals_wanted.py), the producer from the object's id (the framework's
``ObjectWait.producer_of``: a Ray ObjectID embeds the ActorID of the actor whose task returns
it), and the process that hosts that producer from its own log (``WaitEvidence.hosted``). An
actor runs one method at a time, so a get on an actor's result waits for that actor's
process: two actors that get each other's results inside a method close a cycle (ray#3307).
An object whose producer no process of the job is known to host gives no edge: a plain task's
result (any worker may run it) or an actor on another node is not guessed at; nor does one whose
producer's process runs no task (its working thread is in the framework's loop for the next
one): the result is on its way, and that process holds up nobody.
"""

from __future__ import annotations

from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.working import QUEUED_BEHIND, progressing_pids
from hangscope.analyze.graph.barriercalls import barrier_edges, called_method
from hangscope.analyze.graph.loopedges import idle_loop
from hangscope.frameworks import (
    OBJECT_WAITS,
    ObjectWait,
    any_worker_wait,
    does_work,
    runs_method,
)
from hangscope.frameworks.producers import between_tasks, idle_producer
from hangscope.model import SPIN, WHILE, Frame, Process, Snapshot, Thread, in_library
from hangscope.model.waits import SYSCALLS, KernelWaits, WaitEdge


def all_object_edges(snap: Snapshot) -> list[WaitEdge]:
    """The edges of every framework object wait: named producers first (their ids proven),
    then the guesses that read them (tasks, calls, a paused generator's caller, the consumers
    a barrier of calls waits for)."""
    found = object_edges(snap)
    tasks = task_edges(snap, found)
    edges = [*found, *tasks, *call_edges(snap, found), *consumer_edges(snap, [*found, *tasks])]
    return [*edges, *barrier_edges(snap, edges)]


def feeder_edges(snap: Snapshot, edges: list[WaitEdge]) -> dict[int, list[WaitEdge]]:
    """PID -> its object edges from threads but its working one (a feeder's get)."""
    working = {p.pid: p.working_tid for p in snap.processes}
    out: dict[int, list[WaitEdge]] = {}
    for edge in (e for e in edges if e.tid != working.get(e.pid)):
        out.setdefault(edge.pid, []).append(edge)
    return out


def object_edges(snap: Snapshot) -> list[WaitEdge]:
    """waiter's working thread (or the feeder thread it waits on) -> the process hosting the
    producer of each object it waits for."""
    waits = snap.waits
    if waits is None or not waits.hosted:
        return []
    hosts: dict[str, tuple[int, str]] = {}
    for hosted in waits.hosted:
        for ident in hosted.ids:
            hosts.setdefault(ident, (hosted.pid, hosted.source))
    procs = {p.pid: p for p in snap.processes}
    going = progressing_pids(snap)
    edges: list[WaitEdge] = []
    for read in waits.locals:
        proc = procs.get(read.pid)
        if proc is None or proc.is_exited or proc.working_tid is None:
            continue
        threads = {t.tid: t for t in proc.threads}
        for tid, objects in ((proc.working_tid, read.objects),
                             *((o.tid, o.objects) for o in read.thread_objects)):
            if tid in threads:
                edges.extend(_producer_edges(proc, threads[tid], objects, hosts, procs, going))
    return edges


def _producer_edges(proc: Process, thread: Thread, objects: tuple[str, ...],
                    hosts: dict[str, tuple[int, str]], procs: dict[int, Process],
                    going: frozenset[int]) -> list[WaitEdge]:
    """``thread`` of ``proc`` -> the process hosting the producer of each of ``objects``."""
    edges: list[WaitEdge] = []
    seen: set[int] = set()
    for object_hex in objects:
        for wait in OBJECT_WAITS:
            producer = wait.producer_of(bytes.fromhex(object_hex))
            host = hosts.get(producer) if producer is not None else None
            if host is None or host[0] in seen:
                continue
            pid, source = host
            target = procs.get(pid)
            if target is None or idle_producer(target, going):
                continue
            seen.add(pid)
            asked = submitted(thread)
            runs = _running(target, asked)
            why = "the method its line submitted" if runs else "the only call it runs"
            runs = runs or ([] if asked else _only_call(target))
            edges.extend(WaitEdge(
                proc.pid, thread.tid, "object",
                f"a result of {wait.producer_word} {producer} (object {object_hex[:16]}…)",
                f"py-spy --locals: its {wait.frame[0]} waits for that object; the object's "
                f"id names the {wait.producer_word} whose task returns it, and {source} "
                f"says PID {pid} hosts that {wait.producer_word}"
                + (f", whose thread {t.name or t.tid} runs {method}, {why}"
                   if t is not None else ", which runs one task at a time"
                   + _behind(target, asked)),
                pid, t.tid if t is not None else target.working_tid, probable=len(runs) > 1)
                for method, t in (runs or [(None, None)]))
            break
    return edges


def _behind(target: Process, asked: tuple[str, ...]) -> str:
    """The words for a call queued behind a method of ``target`` that loops; "" if none."""
    found = looping_method(target) if asked else None
    if found is None or found[1] in asked:
        return ""
    return f", {QUEUED_BEHIND}{found[1]}, which loops"


def submitted(thread: Thread | None) -> tuple[str, ...]:
    """The methods the thread's innermost program line that submits any submitted through a
    handle (``Frame.submits``)."""
    return next((f.submits for f in thread.frames if f.submits), ()) if thread else ()


def looping_method(host: Process) -> tuple[ObjectWait, str, Frame] | None:
    """The framework's wait, the method the producer's title says runs, and that method's own
    frame on its working thread, where the frame's line stands in a loop that re-checks a
    condition (``while``; an endless ``for``) under the framework's method frame."""
    thread = host.working_thread
    for wait in OBJECT_WAITS:
        found = wait.method.match(host.title or "") if wait.method is not None else None
        if found is None or not wait.looping or wait.method_frame is None or thread is None:
            continue
        method = found.group("method")
        frames = [f for f in thread.frames if not f.native]
        k = next((k for k, f in enumerate(frames) if f.name.rsplit(".", 1)[-1] == method
                  and not in_library(f.file)), None)
        if k is None or frames[k].loop_kind not in (WHILE, SPIN) or not any(
                f.runs(*wait.method_frame) for f in frames[k + 1:]):
            continue
        return wait, method, frames[k]
    return None


def _running(target: Process, methods: tuple[str, ...]) -> list[tuple[str, Thread]]:
    """(method, thread) of each thread of a threaded producer inside one of ``methods``, under
    the framework's method frame (a pool thread running that call); none in a producer that
    runs its calls on its working thread alone."""
    if not methods:
        return []
    found = []
    for t in target.threads:
        python = [f for f in t.frames if not f.native]
        if not any(runs_method(f.name, f.file) for f in python):
            continue
        method = next((m for f in python for m in methods
                       if f.name.rsplit(".", 1)[-1] == m), None)
        if method is not None:
            found.append((method, t))
    return found


def _only_call(target: Process) -> list[tuple[str, Thread]]:
    """(method, thread) of a threaded producer's one pool thread running a call (not its
    working thread), for a waiter whose line names no method (Ray Data's iterator)."""
    found = [(m, t) for t in target.threads if (m := called_method(t.frames)) is not None]
    return found if len(found) == 1 and found[0][1].tid != target.working_tid else []


def task_edges(snap: Snapshot, known: list[WaitEdge]) -> list[WaitEdge]:
    """A thread blocked in a framework's object wait with no producer named (a plain task's
    result: any worker may run it) waits on whichever of the framework's workers runs a task
    now: probable edges to each (a Ray driver in ``ray.wait`` on tasks that one worker
    computes waits for that worker's work)."""
    named = {(e.pid, e.tid) for e in known}
    waiting = {p.pid: found for p in snap.processes if not p.is_exited
               and (found := object_wait(p)) is not None}
    going = progressing_pids(snap)
    busy = [p for p in snap.processes if not p.is_exited and does_work(p.title)
            and p.role not in HELPER_ROLES and not idle_producer(p, going)]
    backs: dict[int, set[int]] = {}  # process -> those whose proven wait is on it
    for e in known:
        if e.to_pid is not None:
            backs.setdefault(e.to_pid, set()).add(e.pid)
    edges: list[WaitEdge] = []
    for proc, thread, (frame, wait) in _gets(snap, waiting):
        if (proc.pid, thread.tid) in named:
            continue
        # A wait points at workers that do not wait for objects themselves: two waiting
        # tasks would each point at the other and read as a cycle, which only their
        # objects' ids could prove (object_edges). But the driver (no worker: none runs a
        # task of it) whose objects are all plain tasks' results may wait on a task that
        # waits in turn (a consumer blocked on a queue): the chain goes on through it.
        plain = plain_results(snap, proc.pid, wait)
        through = not does_work(proc.title) and plain
        # A plain task's result is never an actor's to make: a worker that hosts an actor
        # runs that actor's methods only (its own log says which), so it owes none of them.
        hosts = {h.pid for h in snap.waits.hosted} if plain and snap.waits is not None else set()
        # A task that waits, its object's id proving on what, waits on this very process (an
        # actor running one method at a time, whose method waits for the tasks it started,
        # which call it back: their calls queue behind the method): that task's wait is no
        # guess, so the edge back to it closes a ring the ids prove on one side.
        back = backs.get(proc.pid, set())
        edges.extend(WaitEdge(
            proc.pid, thread.tid, "object", f"a result of a task ({frame.name})",
            f"its {frame.name} waits for objects no {wait.producer_word} of a known process "
            f"returns: any worker running a task may be making them", other.pid,
            other.working_tid, probable=True) for other in busy
            if other.pid != proc.pid and other.pid not in hosts
            and (through or other.pid not in waiting or other.pid in back))
    return edges


def call_edges(snap: Snapshot, known: list[WaitEdge]) -> list[WaitEdge]:
    """A producer whose method awaits another call to it (:func:`awaiting_call`: a Ray async
    actor's queue ``get`` awaits a ``put``) waits on whichever of the framework's workers runs
    a task now: any of them may make that call (probable edges, as :func:`task_edges`'s). With
    none, no edge: analyze/patterns/ends/uncalled.py says nobody will."""
    named = {(e.pid, e.tid) for e in known}
    kernel = snap.waits.kernel if snap.waits is not None else None
    edges: list[WaitEdge] = []
    for proc in snap.processes:
        thread = proc.working_thread
        found = (awaiting_call(proc, kernel) if not proc.is_exited and thread is not None
                 else None)
        if found is None or (proc.pid, thread.tid) in named:
            continue
        method = found[1]
        edges.extend(WaitEdge(
            proc.pid, thread.tid, "object", f"another call to it ({method} awaits one)",
            f"its event loop idles with {method} in flight: the method awaits another call to "
            "it, which any process running a task may make", other.pid, other.working_tid,
            probable=True) for other in callers(snap, proc.pid))
    return edges


def callers(snap: Snapshot, pid: int) -> list[Process]:
    """The processes of the job that may call producer ``pid`` now: every live one but the
    framework's helpers, its workers idle between tasks and those that wait for objects."""
    return [p for p in snap.processes if not p.is_exited and p.pid != pid
            and p.role not in HELPER_ROLES and object_wait(p) is None
            and not (does_work(p.title) and between_tasks(p))]


def awaiting_call(proc: Process, kernel: KernelWaits | None) -> tuple[ObjectWait, str] | None:
    """The framework's wait and the method in flight of a producer whose event loops all
    idle in their select with no timer set (the method awaits another call), or None. A loop
    whose epoll_wait has a timeout (``kernel``'s read of its syscall) has a timer due: the
    method may be sleeping until it (:func:`sleeping_method`)."""
    found = _in_flight(proc)
    if found is None or any(_timer_due(kernel, proc.pid, t.tid) for t in found[2]):
        return None
    return found[0], found[1]


def sleeping_method(proc: Process, kernel: KernelWaits | None) -> str | None:
    """The method in flight of a producer whose event loops all idle, one with a timer due
    (``await asyncio.sleep``: Ray Train's controller between its polls of the workers): it
    runs again when the timer fires, so what waits on it waits for its next turn."""
    found = _in_flight(proc)
    if found is None or not any(_timer_due(kernel, proc.pid, t.tid) for t in found[2]):
        return None
    return found[1]


def _in_flight(proc: Process) -> tuple[ObjectWait, str, list[Thread]] | None:
    """The framework's wait, the method in flight (from the title) and the event-loop threads
    of a producer whose loops all idle in their select."""
    for wait in OBJECT_WAITS:
        if not wait.loop_threads or wait.method is None:
            continue
        found = wait.method.match(proc.title or "")
        loops = [t for t in proc.threads if (t.name or "").startswith(wait.loop_threads)]
        if found and loops and all(idle_loop(t) for t in loops):
            return wait, found.group("method"), loops
    return None


def _timer_due(kernel: KernelWaits | None, pid: int, tid: int) -> bool:
    """The thread blocks in an epoll wait with a timeout: its loop has a timer set."""
    mine = kernel.process(pid) if kernel is not None else None
    call = mine.syscall(tid) if mine is not None else None
    epoll = SYSCALLS.get(kernel.arch, {}).get("epoll_ms", set()) if kernel is not None else set()
    return (call is not None and call.nr in epoll and len(call.args) > 3
            and not call.args[3] & 0x80000000)  # an int of ms: negative (-1) for none


def plain_results(snap: Snapshot, pid: int, wait: ObjectWait) -> bool:
    """Every object ``pid`` waits for (its locals' read) is a plain task's result: its id
    names no producer (an actor's result names its actor, whose host may merely be unread)."""
    objects = [o for r in (snap.waits.locals if snap.waits is not None else ())
               if r.pid == pid for o in r.objects]
    return bool(objects) and all(wait.producer_of(bytes.fromhex(o)) is None for o in objects)


def _gets(snap: Snapshot, waiting: dict[int, tuple[Frame, ObjectWait]]
          ) -> list[tuple[Process, Thread, tuple[Frame, ObjectWait]]]:
    """(process, thread, its object wait) of each working thread in one; and in a process that
    runs no task itself (a driver), each other thread in one: a library's thread that fetches
    what the program's threads read from its queue (Ray Data's prefetcher in ``ray.get``)."""
    out = []
    for proc in snap.processes:
        thread = proc.working_thread
        if proc.pid in waiting and thread is not None:
            out.append((proc, thread, waiting[proc.pid]))
        if proc.is_exited or does_work(proc.title):
            continue
        for other in proc.threads:
            found = None if other is thread or other.helper else _thread_wait(other)
            if found is not None:
                out.append((proc, other, found))
    return out


def _thread_wait(thread: Thread) -> tuple[Frame, ObjectWait] | None:
    for frame in thread.frames:
        wait = None if frame.native else any_worker_wait(frame.name, frame.file)
        if wait is not None:
            return frame, wait
    return None


def object_wait(proc: Process) -> tuple[Frame, ObjectWait] | None:
    """The frame of the framework's object wait its working thread blocks in, and that wait."""
    return _thread_wait(proc.working_thread) if proc.working_thread is not None else None


#: How the edges of a generator task paused until its caller consumes begin.
PAUSED_HOW = "its streaming generator is paused"


def paused_producer(thread: Thread | None) -> ObjectWait | None:
    """The framework's wait whose generator task ``thread`` is paused in, inside its yield,
    until its caller consumes what it yielded (``ObjectWait.paused_native``), or None."""
    for f in (thread.frames[:24] if thread is not None else ()):
        if not f.native:
            return None
        wait = next((w for w in OBJECT_WAITS if w.paused_native and w.paused_native in f.name),
                    None)
        if wait is not None:
            return wait
    return None


def consumer_edges(snap: Snapshot, known: list[WaitEdge]) -> list[WaitEdge]:
    """A producer paused inside a generator task's yield until its caller consumes what it
    yielded (Ray's streaming generator with backpressure) waits for the processes whose object
    waits lead to it: the one that called it is among them (probable edges)."""
    waiters: dict[int, list[WaitEdge]] = {}
    for e in known:
        if e.kind == "object" and e.to_pid is not None and e.to_pid != e.pid:
            waiters.setdefault(e.to_pid, []).append(e)
    if not waiters:
        return []
    procs = {p.pid: p for p in snap.processes}
    edges: list[WaitEdge] = []
    for pid, waiting in waiters.items():
        proc = procs.get(pid)
        thread = proc.working_thread if proc is not None and not proc.is_exited else None
        wait = paused_producer(thread)
        if proc is None or thread is None or wait is None:
            continue
        for e in dict.fromkeys((e.pid, e.tid) for e in waiting):
            edges.append(WaitEdge(
                proc.pid, thread.tid, "object", "its caller to take what its generator yielded",
                f"{PAUSED_HOW} inside its yield until its caller consumes what it yielded "
                f"(native frame {wait.paused_native}): the process waiting on it is its "
                "likely caller", e[0], e[1], probable=True))
    return edges
