"""Who waits for which lock, and who holds it: file locks across processes, Python locks inside one.

Pure functions over the model and the /proc/locks records (collect/locks.py); no I/O.

A file-lock waiter is found two ways. A process blocked in flock(2)/fcntl(F_SETLKW) is a
``->`` line of /proc/locks under the lock it waits for, which names the holder's PID. The
``filelock`` package (the JIT-cache pattern of FlashInfer, Triton, DeepGEMM, torch extensions)
never blocks in the kernel: it polls with LOCK_NB and sleeps, so /proc/locks shows only the
holder; the waiter is known by its ``filelock`` frames, and its file by the path py-spy's
``--locals`` reads (``lock_filename``) or, without it, by the one file lock the job holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hangscope.analyze.evidence.pylocals import as_str, frame_locals, thread_frames
from hangscope.model import Category, Process, Role, Thread
from hangscope.model.waits import FileLockRecord, OutsideProcess
from hangscope.words import verb, who, who_many


@dataclass(frozen=True)
class LockWait:
    """Processes waiting for one file lock, and the process that holds it."""

    waiters: tuple[int, ...]  # PIDs, in rank order
    holder: int | None  # PID; None when /proc/locks shows no holder (a stale lock file)
    path: str | None  # the locked file; None when no process of the chain has it open
    kind: str  # FLOCK | POSIX | OFDLCK (from /proc/locks), or "filelock" (a polling waiter)
    polling: bool = False  # the waiters poll (filelock) rather than block in the kernel
    candidates: tuple[int, ...] = ()  # polling waiters, file unknown: PIDs holding file locks
    ofd: bool = False  # the holder is an OFD lock: /proc/locks gives no PID for those (-1)


def polls_filelock(proc: Process) -> bool:
    """Its working thread is inside filelock's acquire (3.x ``acquire``, 4.x
    ``_poll_until_acquired``), not merely constructing or releasing a lock."""
    thread = proc.working_thread
    return thread is not None and any(
        not f.native and f.file and "/filelock/" in f.file and "acquire" in f.name
        for f in thread.frames)


def file_lock_waits(processes: Sequence[Process], records: Sequence[FileLockRecord],
                    lock_files: Mapping[int, str] | None = None) -> tuple[LockWait, ...]:
    """Map each process that waits for a file lock to the lock's holder and file.

    ``lock_files``: PID -> the path a polling waiter tries to lock (py-spy ``--locals``).
    The wait-for graph (graph/sqliteedges.py) and the facts (evidence/facts.py) both ask of one
    snapshot: the last answer is kept for the same processes and records.
    """
    last = _LAST[0] if _LAST else None
    if last is not None and last[0] is processes and last[1] is records \
            and last[2] == (lock_files or {}):
        return last[3]
    found = _file_lock_waits(processes, records, lock_files)
    _LAST[:] = [(processes, records, dict(lock_files or {}), found)]
    return found


#: The last (processes, records, lock files, answer) of :func:`file_lock_waits`.
_LAST: list[tuple[Sequence[Process], Sequence[FileLockRecord], dict[int, str],
                  tuple[LockWait, ...]]] = []


def _file_lock_waits(processes: Sequence[Process], records: Sequence[FileLockRecord],
                     lock_files: Mapping[int, str] | None) -> tuple[LockWait, ...]:
    by_pid = {p.pid: p for p in processes}
    holders: dict[int, FileLockRecord] = {}  # lock index -> the record that holds it
    for rec in records:
        if not rec.blocked and rec.index not in holders:
            holders[rec.index] = rec
    Key = tuple[int | None, str | None, str, bool, tuple[int, ...], bool]
    groups: dict[Key, list[int]] = {}
    blocked = set()
    for rec in records:
        if rec.blocked and rec.pid in by_pid:
            held = holders.get(rec.index)
            key = (held.pid if held else None, rec.path or (held.path if held else None),
                   rec.kind, False, (), bool(held and held.kind == "OFDLCK"))
            groups.setdefault(key, []).append(rec.pid)
            blocked.add(rec.pid)
    held_by_job = [r for r in holders.values() if r.pid in by_pid]
    for proc in processes:
        if proc.pid in blocked or not polls_filelock(proc):
            continue
        path = (lock_files or {}).get(proc.pid)
        others = [r for r in held_by_job if r.pid != proc.pid]
        # The file it wants, held in the job, or else by a process outside it (a sidecar in a
        # session of its own): /proc/locks names every holder of the host.
        match = [r for r in others if path and r.path == path] or [
            r for r in holders.values()
            if path and r.path == path and r.pid != proc.pid and r.pid not in by_pid] or (
            others if len({r.file_key for r in others}) == 1 else [])
        held = match[0] if match else None
        # Without the waiter's path and with several locks held, name the holders, not one.
        candidates = () if held else tuple(sorted({r.pid for r in others if r.pid}))
        key = (held.pid if held else None, path or (held.path if held else None),
               "filelock", True, candidates, bool(held and held.kind == "OFDLCK"))
        groups.setdefault(key, []).append(proc.pid)
    if not groups:
        return ()  # (no sort of every process of 131,072 ranks for nothing)
    order = {p.pid: i for i, p in enumerate(sorted(
        processes, key=lambda p: (p.rank.key if p.rank and p.rank.key is not None else 1 << 30,
                                  p.pid)))}
    return tuple(LockWait(tuple(sorted(pids, key=order.__getitem__)), holder, path, kind, polling,
                          candidates, ofd)
                 for (holder, path, kind, polling, candidates, ofd), pids in groups.items())


def filelock_path(threads: Sequence[object], tid: int | None) -> str | None:
    """The file a polling ``filelock`` waiter wants, from ``py-spy dump --locals --json``:
    ``lock_filename`` (filelock 3.x ``acquire``, 4.x ``_poll_until_acquired``) or
    ``canonical_path`` of a frame in the filelock package."""
    for frame in thread_frames(threads, tid):
        if "/filelock/" not in str(frame.get("filename") or ""):
            continue
        values = frame_locals(frame)
        for name in ("lock_filename", "canonical_path"):
            path = as_str(values.get(name))
            if path:
                return path
    return None


def _short_path(path: str) -> str:
    parts = path.rsplit("/", 2)
    return path if len(parts) < 3 else f".../{parts[1]}/{parts[2]}"


def describe_outside(proc: OutsideProcess) -> str:
    """``PID 123 (python ckpt_sync.py), not part of this job``: its program and first argument."""
    words = [a.rsplit("/", 1)[-1] for a in proc.cmdline[:2]]
    return f"PID {proc.pid}" + (f" ({' '.join(words)})" if words else "") + \
        ", not part of this job"


def outside_doing(proc: OutsideProcess) -> str:
    """What an outside process does, from /proc and its one nonblocking py-spy dump: ``sleeps
    at main (sync.py:32) (state S, wchan hrtimer_nanosleep)``."""
    state = {"R": "runs", "D": "waits in the kernel (uninterruptible)", "T": "is stopped",
             "t": "is stopped by a tracer", "Z": "has exited (a zombie)"}.get(
        proc.state or "", "sleeps")
    kernel = ", ".join(x for x in (f"state {proc.state}" if proc.state else "",
                                    f"wchan {proc.wchan}" if proc.wchan else "") if x)
    return state + (f" at {proc.site}" if proc.site else "") + (f" ({kernel})" if kernel else "")


def describe_lock_wait(wait: LockWait, processes: Sequence[Process],
                       outside: Mapping[int, OutsideProcess] | None = None) -> str:
    """``ranks 1-2 wait for the file lock on .../x/.lock held by rank 0 (PID 9), which is in
    sleep at build_kernel (job.py:49)``; a holder outside the job is named from ``outside``."""
    by_pid = {p.pid: p for p in processes}
    waiters = [by_pid[pid] for pid in wait.waiters if pid in by_pid]
    waits = "waits" if len(waiters) == 1 else "wait"
    what = f"the file lock on {_short_path(wait.path)}" if wait.path else "a file lock"
    text = f"{who_many(waiters)} {waits} for {what}"
    if wait.holder is None and wait.candidates:
        holders = [by_pid[pid] for pid in wait.candidates if pid in by_pid]
        return text + f", held by one of {who_many(holders)} (py-spy --locals names the file)"
    if wait.holder is None and wait.ofd:
        return text + (", held as an OFD lock (fcntl F_OFD_SETLK) by no process of this job: "
                       "/proc/locks gives such a lock's holder no PID (-1); the fdinfo of the "
                       "process holding the file open names it")
    if wait.holder is None:
        return text + (", which no process of this job holds (another job's lock, a stale "
                       "lock file, or a lock on NFS)")
    holder = by_pid.get(wait.holder)
    if holder is None:
        known = (outside or {}).get(wait.holder)
        if known is None:
            return text + f" held by PID {wait.holder}, outside this job"
        return text + f", held by {describe_outside(known)}: it {outside_doing(known)}"
    text += f" held by {who(holder)}"
    thread = holder.working_thread
    # The JIT-cache pattern reads as such: the holder builds under the lock, in its own
    # frames (Triton, Inductor) or through a compiler child (gcc, nvcc, ninja) it waits for.
    # A compiler that exited during the window counts: a build runs one compiler after another.
    compilers = [p for p in processes if p.role is Role.COMPILER and p.ppid == holder.pid]
    if compilers:
        names = ", ".join(f"{_program(p)} (PID {p.pid})" for p in compilers[:3])
        ran = "ran" if all(p.is_exited for p in compilers) else "runs"
        text += f", which compiles: it {ran} {names}"
        if thread is not None and thread.site:
            text += f" from {thread.site}"
    elif thread is not None and thread.category is not None:
        text += f", which {verb(thread.category, op=thread.op)}"
        if thread.site:
            text += f" at {thread.site}"
    return text


def _program(proc: Process) -> str:
    """The program a process runs, by the base name of its argv[0]: ``gcc``, ``nvcc``."""
    first = proc.cmdline[0] if proc.cmdline else (proc.exe or "?")
    return first.rsplit("/", 1)[-1]


# -- in-process Python locks -------------------------------------------------------------

_WAITS = frozenset({Category.LOCK, Category.GIL_WAIT})


def python_lock_holder(proc: Process) -> Thread | None:
    """The thread that most likely holds the lock the others wait for, when evidence allows.

    Evidence: every other non-helper Python thread of the process waits on a lock, and exactly
    one does not (it runs, sleeps, or waits elsewhere while holding it). None when it is not
    one thread (no waiter, or two candidates).
    """
    threads = [t for t in proc.threads if t.python and not t.helper and t.frames]
    waiting = [t for t in threads if t.category in _WAITS]
    rest = [t for t in threads if t.category not in _WAITS]
    return rest[0] if waiting and len(rest) == 1 else None
