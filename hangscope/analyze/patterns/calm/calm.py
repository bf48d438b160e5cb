"""Paused or idle, not hung: a job whose every process waits for nobody in the job.

A measured "stuck" says a thread never left its line and moved nothing; it does not say that
anything is wrong. Two such waits are healthy when they are all there is:

- *paused*: the working thread sleeps (``time.sleep``, ``asyncio.sleep``: the sleep category)
  and the kernel saw it wake 0 times in the window: one long sleep between phases. (A sleep
  that wakes again and again without leaving its line re-checks a flag: a poll, still stuck.)
- *idle*: a server waiting for work: the process listens on a port and its working thread's
  innermost Python frame is the server's own wait for the next event (``selectors``
  under ``socketserver``/``asyncio``'s loop, or ``accept``), not a blocking call inside a
  handler or a coroutine (an event loop blocked by a synchronous ``recv`` is hung). A
  pre-fork server's master (uvicorn ``--workers``, gunicorn) is idle too where it waits in its
  server's own code and a child of it accepts on the listening socket it opened: its
  supervisor loop pings the workers, its own ticks (analyze/evidence/progress.py ``_ticks``).

What waits only on those, for work they will send (a worker reading its task pipe from an
idle server, a worker waiting for a coordinator asleep between phases), is idle too
(analyze/patterns/calm/calm_chain.py); a client waiting for a reply never is.

Only when every subject is paused or idle is the job so: a process that sleeps while ranks
wait for it in a collective is a straggler, and a server that a waiting client talks to has a
request in flight. :func:`calm_progress` then rewrites the measured decisions to ``paused`` or
``idle`` (the report never calls a healthy job stuck), and the ``calm`` rule states it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from hangscope.analyze.evidence.progress import (
    IDLE,
    PAUSED,
    PROGRESSING,
    SLOW,
    STUCK,
    WAITING,
    dominant_stack,
    job_progress,
)
from hangscope.analyze.evidence.roles import HELPER_ROLES
from hangscope.analyze.evidence.working import chain_to_work, raw_window, window_thread
from hangscope.analyze.graph.threadedges import library_thread
from hangscope.analyze.patterns.calm.calm_chain import Calm, calm_chain, zmq_front_unjoined
from hangscope.analyze.patterns.calm.engines import (
    WAITS_FOR_WORK,
    idle_front,
    idle_reason,
    python_names,
    serves_until_stopped,
)
from hangscope.analyze.patterns.threadpatterns import notified_wait, program_threads
from hangscope.frameworks import SERVER_LOOP_FILES, does_work, server_loop_pattern
from hangscope.model import Category, Process, Role, Snapshot, Thread
from hangscope.model.progress import JobProgress, RankProgress
from hangscope.model.waits import FILE_WATCHES, SYSCALLS, FdRecord, KernelWaits, TaskSyscall

#: ...and the loop around it: a server's, not a one-off wait on a socket.
_SERVER_LOOP = server_loop_pattern(
    ("socketserver.py", "asyncio/base_events.py", "http/server.py", "wsgiref/"))


_ACCEPT = re.compile(r"^(?:\S+\.)?(?:accept|_accept) \((?:[^)]*/)?socket\.py\)")

_POLL_WORDS = re.compile(r"but never left that (?:line|loop) and no data moved beyond its own "
                         r"polling: a timed wait that re-checks, not progress")


def _innermost_python(thread: Thread | None) -> tuple[str, tuple[str, ...]]:
    names = tuple(python_names(thread)) if thread else ()
    return (names[0] if names else ""), names


def _window_stack(snap: Snapshot, proc: Process, measured: RankProgress) -> tuple[str, ...]:
    """The window's most sampled stack of the thread ``measured`` judged."""
    raw = raw_window(snap, proc)
    thread = window_thread(raw, measured) if raw is not None else None
    return dominant_stack(thread) if thread is not None else ()


def calm_kind(proc: Process, measured: RankProgress | None,
              kernel: KernelWaits | None = None, snap: Snapshot | None = None) -> str | None:
    """``paused`` or ``idle`` where this process alone reads so; None otherwise."""
    if measured is None and native_server(proc, kernel):
        return IDLE
    if measured is None or measured.evidence != "counters":
        return None
    # A server's wait is read on the thread the window judged (its main thread in its select
    # loop), which need not be the one the stacks call working (a thread idle in Queue.get).
    thread = proc.working_thread
    if thread is None or any(f.runs("shutdown", "concurrent/futures/thread.py")
                             for t in proc.threads for f in t.frames):
        return None  # an executor's shutdown: it waits for its threads to end, not for work
    # One long sleep (no wake-up), or a sleep longer than the window that woke once to check
    # and slept again (a drain flag polled every few seconds): between phases.
    if thread.category is Category.SLEEP and (measured.wakes or 0) <= 1 and (
            measured.decision == STUCK or (measured.decision == SLOW and measured.wakes == 1)):
        return PAUSED
    if measured.decision != STUCK:
        return None
    thread = next((t for t in proc.threads if t.tid == measured.tid), thread)
    if any(s.pending for s in proc.listening):
        return None  # clients wait in its accept queue: a request is in flight
    innermost, names = _innermost_python(thread)
    seen = measured.mostly or (_window_stack(snap, proc, measured) if snap else ())
    if seen and not WAITS_FOR_WORK.search(innermost):
        # where it waited most of the window, not where the last dump caught it: a loop
        # whose line moved, or one the window saw in its select each sample while the dump
        # fell on a quick call of one turn (a config fetch of a few milliseconds)
        innermost, names = seen[0], seen
    if proc.listening and WAITS_FOR_WORK.search(innermost) and (any(
            _SERVER_LOOP.search(n) for n in names[1:]) or (
            _ACCEPT.search(innermost) and proc.role is not Role.RANK)):
        # a server loop's wait, or a plain accept() on its own listening socket outside any
        # rank (a metrics exporter's loop): a rank's accept may be a rendezvous that hangs
        return IDLE
    if proc.listening and proc.role is not Role.RANK and _polls_listener(kernel, proc, thread):
        return IDLE  # the program's own select loop over its listening socket
    if serves_until_stopped(proc, thread):
        return IDLE  # gRPC's main thread: the framework's own threads serve
    if snap is not None and any(part in (f.file or "") for f in thread.frames if not f.native
                                for part in SERVER_LOOP_FILES) and _serving_children(snap, proc):
        # a pre-fork server's master (uvicorn --workers, gunicorn): its children accept on
        # the listening socket it opened, and it waits in its server's own supervisor loop
        return IDLE
    if proc.role is not Role.RANK and zmq_front_unjoined(kernel, proc, thread):
        return IDLE
    if proc.role is not Role.RANK and _watches_files(kernel, proc, thread):
        return IDLE  # a drop-folder service: it waits for a file to appear
    return None


def _serving_children(snap: Snapshot, proc: Process) -> bool:
    """A child of ``proc`` holds one of ``proc``'s listening sockets (the same inode): the
    socket was opened for the children to serve on."""
    mine = {s.inode for s in proc.listening}
    return bool(mine) and any(p.ppid == proc.pid and p.host == proc.host and not p.is_exited
                              and mine & {s.inode for s in p.listening} for p in snap.processes)


def native_server(proc: Process, kernel: KernelWaits | None) -> bool:
    """A program without Python (a redis-server, an nginx, a broker) whose main thread waits in
    epoll/poll/select over its own listening socket and which used no CPU to speak of: its
    event loop waits for the next client. py-spy measures no window for it; the kernel's view
    of its main thread is the evidence (its other threads idle on condition variables, as a
    native server's background threads do)."""
    main = next((t for t in proc.threads if t.tid == proc.pid), None)
    return (main is not None and proc.listening and proc.role is not Role.RANK
            and not any(s.pending for s in proc.listening)  # clients wait to be accepted
            and not any(t.python for t in proc.threads) and not proc.is_exited
            and (proc.cpu_percent or 0.0) < _NATIVE_IDLE_CPU
            and _polls_listener(kernel, proc, main))


#: CPU (% of one core) under which a native server's loop is taken as waiting, not serving.
_NATIVE_IDLE_CPU = 5.0


def _blocked_call(kernel: KernelWaits | None, proc: Process, thread: Thread
                  ) -> tuple[dict[int, FdRecord], TaskSyscall] | None:
    """The thread's fds (by number) and the syscall it is blocked in; None where unread."""
    mine = kernel.process(proc.pid) if kernel is not None else None
    call = mine.syscall(thread.tid) if mine else None
    if mine is None or call is None:
        return None
    return {r.fd: r for r in mine.fds}, call


def _watches_files(kernel: KernelWaits | None, proc: Process, thread: Thread) -> bool:
    """The thread blocks reading (or polling) only an inotify/fanotify fd: it waits for a
    file to be written in a watched directory, by someone outside the job (a drop folder, a
    config reload). Nothing in the job owes it anything: work, not a wait on the job."""
    found = _blocked_call(kernel, proc, thread)
    if kernel is None or found is None:
        return False
    fds, call = found
    watched = [fd for fd, _ in (*call.watched, *call.polled)]
    if not watched and call.nr in SYSCALLS.get(kernel.arch, {}).get("read", ()) and call.args:
        watched = [call.args[0]]
    return bool(watched) and all(
        (rec := fds.get(fd)) is not None and rec.target.startswith(FILE_WATCHES)
        for fd in watched)


def _polls_listener(kernel: KernelWaits | None, proc: Process, thread: Thread) -> bool:
    """The thread waits in epoll/poll/select over a set of fds that holds a socket with no
    connection (no Unix peer, no TCP ends): its listening socket. Whatever loop the program
    wrote around it, a new client's connection is among what it waits for: work."""
    found = _blocked_call(kernel, proc, thread)
    if kernel is None or found is None:
        return False
    fds, call = found
    connected = {u.inode for u in kernel.unix_peers} | {c.inode for c in kernel.tcp}
    return any((rec := fds.get(fd)) is not None and rec.target.startswith("socket:")
               and rec.inode is not None and rec.inode not in connected and events & 1
               for fd, events in (*call.watched, *call.polled))


def _reworded(measured: RankProgress, kind: str, proc: Process) -> RankProgress:
    reason = measured.reason.removeprefix("blocked: ").removeprefix("polling without progress: ")
    reason = _POLL_WORDS.sub("and went back to waiting: nothing asked it for work", reason)
    if kind == IDLE and not proc.listening:  # _watches_files: a drop folder
        reason = (f"waits for a file to be written where it watches (inotify), none yet: "
                  f"{reason}")
    elif kind == IDLE:
        ports = ", ".join(str(s.port) for s in proc.listening if s.port) or "its socket"
        reason = f"waits for requests on port {ports}, none in flight: {reason}"
    else:
        reason = f"asleep between phases, never woke: {reason}"
    return replace(measured, decision=kind, reason=reason)


def _native_idle(proc: Process) -> RankProgress:
    """The decision for a native server (no Python, no measured window): idle, by the kernel."""
    ports = ", ".join(str(s.port) for s in proc.listening if s.port) or "its socket"
    return RankProgress(proc.pid, IDLE, "kernel", (
        f"waits for requests on port {ports}, none in flight: its main thread waits in its "
        f"event loop (epoll/poll) over its listening socket, {proc.cpu_percent or 0:.0f}% of "
        "a CPU"), proc.pid)


def _chained(measured: RankProgress, why: Calm, calm: dict[int, Calm]) -> RankProgress:
    """A waiter on a calm process: idle, waiting for the work it will send."""
    via = calm.get(why.via or 0)
    if why.polls:
        every = measured.reason.partition("(every ")[2].partition(")")[0]
        return replace(measured, decision=IDLE, reason=(
            f"asks PID {why.via} (idle) for work on {why.what}"
            f"{f' every {every}' if every else ' again and again'}; each request ends "
            "with an empty answer or its own timeout and it asks again: a long poll of an "
            "empty queue (if it waits for a result rather than for work, that result was "
            "lost)"))
    state = "paused between phases" if via is not None and via.kind == PAUSED and \
        via.via is None else "idle"
    reason = measured.reason.removeprefix("blocked: ")
    return replace(measured, decision=IDLE, reason=(
        f"waits for work from PID {why.via} ({state}) on {why.what}, none asked for yet: "
        f"{reason}"))


def calm_progress(snap: Snapshot) -> JobProgress | None:
    """The measured decisions with paused/idle in place of stuck, when every subject is."""
    progress = snap.progress
    if progress is None or not progress.ranks:
        return progress
    by_pid = {r.pid: r for r in progress.ranks}
    subjects = [p for p in snap.subjects if not p.is_exited]
    if not subjects or len({p.pid for p in snap.processes}) != len(snap.processes):
        return progress  # a merged dump: PIDs repeat, a decision cannot be matched
    if any(p.state == "Z" and (p.exit_code or 0) < 0 for p in snap.processes):
        return progress  # a process of it was killed (a crash) and never reaped: not calm
    # Roots among the subjects, and a rank's DataLoader workers asleep in their dataset
    # (a slow fetch between batches): what a rank waits on for its next batch.
    loaders = [p for p in snap.processes if p.role is Role.DATA_WORKER and not p.is_exited]
    kernel = snap.waits.kernel if snap.waits is not None else None
    roots = {p.pid: kind for p in (*subjects, *loaders)
             if (kind := calm_kind(p, by_pid.get(p.pid), kernel, snap))}
    parked = _parked(snap, subjects, by_pid)
    roots.update({pid: IDLE for pid in parked})
    calm = calm_chain(snap, subjects, roots, by_pid)
    # A helper (the resource tracker reading its pipe) waits as helpers always do: it is no
    # evidence either way, unless it was seen to work.
    judged = [p for p in subjects if not (p.role in HELPER_ROLES and (
        by_pid.get(p.pid) is None or by_pid[p.pid].decision != PROGRESSING))]
    if not judged or not all(p.pid in calm for p in judged):
        return _idle_engine(snap, progress)
    procs = {p.pid: p for p in subjects}
    ranks = tuple(r if r.pid not in calm or r.pid not in procs
                  else replace(r, decision=IDLE, reason=parked[r.pid] + r.reason.removeprefix(
                      "blocked: ")) if r.pid in parked
                  else _reworded(r, calm[r.pid].kind, procs[r.pid]) if calm[r.pid].via is None
                  else _chained(r, calm[r.pid], calm) for r in progress.ranks)
    ranks += tuple(_native_idle(procs[pid]) for pid in roots
                   if pid not in by_pid and pid in procs)
    # A server waiting for requests makes the job idle; else it sleeps between phases.
    job = IDLE if IDLE in roots.values() else PAUSED
    first = next((r for r in ranks if r.pid in roots and roots[r.pid] == job), ranks[0])
    return replace(progress, decision=job, ranks=ranks, reason=(
        f"every process waits for nobody in the job ({job}); for example PID {first.pid}: "
        f"{first.reason}"))


def _parked(snap: Snapshot, subjects: list[Process],
            by_pid: dict[int, RankProgress]) -> dict[int, str]:
    """Drivers parked while their framework's workers wait between tasks: PID -> the words.

    A driver that hands work to a framework's workers (Ray actors) and serves forever parks
    its only thread of its own on an ``Event().wait()`` that no thread of it can set (a signal
    handler ends it), blocked the whole window; no lost wake-up (one thread, by design), and
    with every worker idle in its task loop (the window's ``idle``) nothing is in flight."""
    workers = [p for p in snap.processes if not p.is_exited and p.role not in HELPER_ROLES
               and does_work(p.title)]
    if not workers or any((r := by_pid.get(p.pid)) is None or r.decision != IDLE
                          for p in workers):
        return {}
    found = {}
    for proc in subjects:
        measured = by_pid.get(proc.pid)
        if measured is None or measured.decision != STUCK or measured.evidence != "counters" \
                or measured.wakes:
            continue  # (woken in the window: a timed wait, its own poll)
        own = [t for t in program_threads(proc) if not library_thread(t)]
        wait = notified_wait(own[0]) if len(own) == 1 else None
        if wait is None or wait.name != "Event.wait" or own[0].tid != measured.tid:
            continue
        pids = ", ".join(str(p.pid) for p in workers[:6])
        found[proc.pid] = (
            f"parked: its only thread of its own waits in Event.wait, which no thread of it "
            f"can set (a serve-forever wait a signal ends), while its framework's workers "
            f"(PID{'s' if len(workers) > 1 else ''} {pids}) wait between tasks: ")
    return found


def _idle_engine(snap: Snapshot, progress: JobProgress) -> JobProgress:
    """Every process of a serving engine waits for the next message while its front end has
    no request open (analyze/patterns/calm/engines.py): idle."""
    found = idle_front(snap)
    if found is None:
        return progress
    front, ports = found
    ranks = tuple(replace(r, decision=IDLE, reason=idle_reason(front, ports, r))
                  if r.decision in (STUCK, SLOW) else r for r in progress.ranks)
    return replace(progress, decision=IDLE, ranks=ranks, reason=(
        f"every process waits for work; for example PID {ranks[0].pid}: {ranks[0].reason}"))


def fetching_loaders(snap: Snapshot) -> frozenset[int]:
    """DataLoader workers asleep in the program's dataset and waking again and again: a fetch
    that sleeps per item (a remote read's backoff, a rate limit) works, slowly; the window
    only calls it a poll because its batch is not written yet."""
    by_pid = {r.pid: r for r in snap.progress.ranks} if snap.progress else {}
    return frozenset(
        p.pid for p in snap.processes if p.role is Role.DATA_WORKER and not p.is_exited
        and (t := p.working_thread) is not None and t.category is Category.SLEEP
        and (r := by_pid.get(p.pid)) is not None and r.decision in (STUCK, SLOW)
        and r.evidence == "counters" and (r.wakes or 0) > 0)


def waiting_on_work(snap: Snapshot) -> JobProgress | None:
    """A process judged stuck by its counters (blocked, or woken again and again on one line)
    whose wait-for chain ends at a process the window saw progress waits for work being done
    (a Ray driver looping ``ray.get`` on an actor that computes: each get returns and the
    next begins on the same line, a poll by its own window alone): ``waiting``, not stuck."""
    progress = snap.progress
    if progress is None or not any(r.decision == PROGRESSING for r in progress.ranks):
        return progress
    ranks = []
    for r in progress.ranks:
        chain = chain_to_work(snap, r.pid) if (
            r.decision == STUCK and r.evidence == "counters") else None
        if chain is None:
            ranks.append(r)
            continue
        through = (f" through PID{'s' if len(chain) > 3 else ''} "
                   + ", ".join(map(str, chain[1:-1])) if len(chain) > 2 else "")
        ranks.append(replace(r, decision=WAITING, reason=(
            f"waits for PID {chain[-1]}{through}, which progresses: "
            + r.reason.removeprefix("blocked: ").removeprefix("polling without progress: "))))
    if tuple(ranks) == progress.ranks:
        return progress
    job = job_progress(ranks)
    return replace(progress, decision=job.decision, reason=job.reason, ranks=tuple(ranks))


def waiting_progress(progress: JobProgress | None,
                     fetching: frozenset[int] = frozenset()) -> JobProgress | None:
    """While a process progresses, one blocked the whole window (never woke) waits (for it, or
    for what it produces): ``waiting``, not stuck, and the job is slow (issue 17 item 7: one
    rank computing for a long time while the others wait for it is slow, never "stuck").
    The verdict rules still see them as not moving (facts.stuck) and name the one that works.
    """
    if progress is None:
        return progress
    # One that moved, else one that runs on CPU without proof either way (starved, or one
    # long call): both work, which a blocked process may be waiting for.
    going = next((r for r in progress.ranks if r.decision == PROGRESSING), None) or next(
        (r for r in progress.ranks if r.decision == SLOW and r.evidence == "counters"
         and (r.wakes is None or r.wakes == 0)), None) or next(
        (r for r in progress.ranks if r.pid in fetching), None)
    if going is None:
        return progress
    doing = "progresses" if going.decision == PROGRESSING else "fetches (sleeps and wakes in " \
        "its dataset)" if going.pid in fetching else "runs"
    ranks = tuple(replace(r, decision=WAITING, reason=(
        f"waits while PID {going.pid} {doing}: " + r.reason.removeprefix("blocked: ")))
        if r.decision == STUCK and r.evidence == "counters" and r.wakes == 0 else replace(
            r, decision=SLOW, reason="a DataLoader worker fetching slowly, asleep and woken "
            "again and again in its dataset (not a poll: its batch is not written yet): "
            + r.reason.removeprefix("polling without progress: ")) if r.pid in fetching else r
        for r in progress.ranks)
    if ranks == progress.ranks:
        return progress
    job = job_progress(ranks)
    return replace(progress, decision=job.decision, reason=job.reason, ranks=ranks)
