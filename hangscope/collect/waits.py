"""The job's wait facts: ``cat /proc/locks``, ``ls -l /proc/PID/fd{,info}``,
``cat /proc/PID/task/*/syscall``, ``ss -xtp``, ``py-spy dump --locals``.

/proc/locks and the kernel wait facts (fds with their ends and locks, blocked syscalls, socket
peers: collect/procfs.py ``read_kernel_waits``) are cheap reads of the job's processes.
``py-spy dump --locals --json`` is asked only of the processes the live pipeline names (it
decides whom: the ranks polling a ``filelock``, waiting in send/recv or in a store get/wait,
analyze/evidence/locals_wanted.py);
it costs what a plain dump costs (tests/fixtures/p2p/README.md). This module only reads: what
the locals mean is the caller's ``interpret``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from hangscope.collect.locks import file_keys, read_file_locks
from hangscope.collect.outside import read_outside
from hangscope.collect.procfs import (
    read_fd_records,
    read_kernel_waits,
    read_syscalls,
    read_tcp_connections,
    read_unix_peers,
)
from hangscope.collect.pyspy import dump_locals
from hangscope.frameworks import OBJECT_WAITS
from hangscope.model import Process, Thread
from hangscope.model.waits import (
    SYSCALLS,
    FdRecord,
    Hosted,
    KernelWaits,
    LocalsRead,
    WaitEvidence,
)

#: At most this many --locals reads per snapshot (a 1,000-rank pipeline: the first ones tell).
MAX_LOCALS = 64

#: How much of the head of a framework's log is read for the producer a process hosts: the
#: line comes as the producer starts (after a few periodic stats dumps at most, ~4 KiB each).
HOST_LOG_BYTES = 1 << 20

#: (PID, the py-spy --locals threads of it) -> what they say, the caller's reading.
Interpret = Callable[[int, Sequence[object]], LocalsRead]


#: Futex waiters whose syscall is read per process: whether each waits with a deadline (a
#: long poll's handler threads: analyze/patterns/calm/longpoll.py). A 1,000-thread pool is mostly
# futex
#: waiters, and one read costs ~0.2 ms.
MAX_FUTEX_READS = 32


def syscall_tids(proc: Process) -> list[int]:
    """The threads whose syscall can name what they wait on (not running ones), and the first
    :data:`MAX_FUTEX_READS` parked on a futex (a lock, a condition: no fd; the syscall's
    arguments say only whether the wait has a deadline)."""
    blocked = [t for t in proc.threads if t.state in ("S", "D", None)]
    futex = [t.tid for t in blocked if (t.wchan or "").startswith("futex")]
    return [t.tid for t in blocked if not (t.wchan or "").startswith("futex")] + \
        futex[:MAX_FUTEX_READS]


def _locals(pid: int, interpret: Interpret, timeout: float, pyspy: str | None) -> LocalsRead:
    threads = dump_locals(pid, timeout=timeout, pyspy=pyspy)
    if threads is None:
        return LocalsRead(pid, error="py-spy dump --locals gave no answer")
    return interpret(pid, threads)


def read_waits(procs: Sequence[Process], asked: Sequence[int] = (),
               interpret: Interpret | None = None, timeout: float = 5.0,
               pyspy: str | None = None) -> WaitEvidence:
    """/proc/locks and the kernel wait facts of the job's live processes, and ``--locals``
    of the PIDs in ``asked`` (empty: never pause a target, as --nonblocking wants)."""
    live = [p.pid for p in procs if not p.is_exited]
    records = read_file_locks(live)
    kernel = read_kernel_waits(live, {p.pid: syscall_tids(p) for p in procs if p.threads})
    kernel = settled(kernel, [p for p in procs if not p.is_exited])
    asked = list(asked)[:MAX_LOCALS]
    reads: tuple[LocalsRead, ...] = ()
    if asked and interpret is not None:
        with ThreadPoolExecutor(max_workers=min(8, len(asked)),
                                thread_name_prefix="hangscope-locals") as pool:
            reads = tuple(pool.map(lambda pid: _locals(pid, interpret, timeout, pyspy), asked))
    wanted = file_keys(r.lock_file for r in reads if r.lock_file)
    if wanted:
        # A polling filelock waiter is no line of /proc/locks: the file it wants (its
        # locals) names the lock, and /proc/locks its holder, wherever that one runs.
        records = read_file_locks(live, files=wanted)
    hosted = read_hosted(kernel) if any(r.objects for r in reads) else ()
    # Only the holders of locks the job waits for: a lock it shares (a read lock) leads nowhere.
    waited = {r.file_key for r in records if r.blocked and r.pid in live} | set(wanted)
    holders = [r.pid for r in records
               if not r.blocked and r.pid is not None and r.file_key in waited]
    outside = read_outside(kernel, holders, set(live), pyspy, min(2.0, timeout))
    return WaitEvidence(file_locks=records, locals=reads, kernel=kernel, hosted=hosted,
                        outside=outside)


def read_hosted(kernel: KernelWaits) -> tuple[Hosted, ...]:
    """Which producers (a framework's actors) each process hosts: the head of the framework's
    log file that the process holds open (its fds) names them."""
    out: list[Hosted] = []
    for pf in kernel.processes:
        for rec in pf.fds:
            wait, named = next(((w, m) for w in OBJECT_WAITS
                                if (m := w.host_log.search(rec.target))), (None, None))
            if wait is None or named is None or (
                    "pid" in named.groupdict() and int(named.group("pid")) != pf.pid):
                continue
            try:
                with open(rec.target, "rb") as f:
                    head = f.read(HOST_LOG_BYTES)
            except OSError:
                continue
            ids = tuple(dict.fromkeys(m.group("id").decode() for m in
                                      wait.host_line.finditer(head)))
            if ids:
                out.append(Hosted(pf.pid, ids, rec.target))
    return tuple(out)


# -- the syscall read at the moment of the stack ----------------------------------------
#
# Reread where the two disagree.
#
# A thread's stack comes from py-spy's dump; its syscall (``/proc/PID/task/TID/syscall``) is
# read after it, when the wait facts are read. A thread that goes round a loop between two
# waits (an event loop between its ``epoll_wait`` and a synchronous socket read inside one of
# its callbacks) may be caught by the dump in one and by the read in the other: the report
# then joins a stack blocked in ``poll`` on a socket with a kernel that says ``epoll_wait``,
# and each fact alone tells a different story (measured: a loop whose fetch takes 60 ms of
# each 110 ms turn, 6 dumps of 6).
#
# Where the dump's innermost native frame is a libc wrapper of a blocking syscall and the
# kernel's syscall is not one that wrapper makes, the syscall is read again, a few times
# within a short deadline, until it is: a thread that goes round its loop comes back to where
# its stack was. A thread that left for good keeps the first read (the deadline bounds the
# cost; only disagreeing threads are reread). The process's fds are read again with it: the
# socket such a loop reads is a new connection each turn, maybe not open when the fds were
# read (an fd the first read found keeps its record).

#: How long the rereads may take in all, and the pause between two passes: a loop's turn
#: is tens of milliseconds; one pass costs ~0.1 ms a thread.
SETTLE_DEADLINE_S = 0.15
SETTLE_PAUSE_S = 0.003
#: At most this many threads are reread per dump (each pass reads each once).
SETTLE_MAX_THREADS = 16

# libc's blocking wrappers (the innermost native frame's name, its decorations off) and the
# syscalls each makes, by machine. ``restart_syscall`` (SYSCALLS' "restart") agrees with
# any: a wait a ptrace stop interrupted goes on as it.
_MAKES = {
    "x86_64": {"poll": {7, 271}, "ppoll": {271}, "epoll_wait": {232, 281, 441},
               "epoll_pwait": {281, 441}, "select": {23, 270}, "pselect": {270},
               "recv": {45, 47}, "recvfrom": {45}, "recvmsg": {47}, "read": {0, 17, 19},
               "accept": {43, 288}, "accept4": {288}, "nanosleep": {35, 230},
               "clock_nanosleep": {230}, "wait4": {61}, "waitpid": {61}, "waitid": {247}},
    "aarch64": {"poll": {73}, "ppoll": {73}, "epoll_wait": {22, 441},
                "epoll_pwait": {22, 441}, "select": {72}, "pselect": {72},
                "recv": {207, 212}, "recvfrom": {207}, "recvmsg": {212}, "read": {63, 65},
                "accept": {202, 242}, "accept4": {242}, "nanosleep": {101, 115},
                "clock_nanosleep": {115}, "wait4": {260}, "waitpid": {260}, "waitid": {95}},
}


def wrapper(name: str) -> str:
    """``__GI___poll`` -> ``poll``, ``__libc_recv`` -> ``recv``, ``read@GLIBC_2.2.5`` ->
    ``read``: the libc function under its decorations."""
    name = name.split("@", 1)[0].lstrip("_")
    for prefix in ("GI_", "libc_"):
        name = name.removeprefix(prefix).lstrip("_")
    return name.removesuffix("_nocancel").removesuffix("64")


def _makes(thread: Thread, arch: str) -> set[int] | None:
    """The syscalls the dump's innermost native frame of ``thread`` makes; None: no frame, or
    not a blocking wrapper this table knows (nothing to compare)."""
    first = thread.frames[0] if thread.frames else None
    if first is None or not first.native:
        return None
    return _MAKES.get(arch, {}).get(wrapper(first.name))


def settled(kernel: KernelWaits, procs: Sequence[Process]) -> KernelWaits:
    """``kernel`` with each thread's syscall read again where it disagrees with its stack."""
    restart = SYSCALLS.get(kernel.arch, {}).get("restart", set())
    wanted: dict[tuple[int, int], set[int] | None] = {}
    for proc in procs:
        mine = kernel.process(proc.pid)
        if mine is None or mine.error is not None:
            continue
        for thread in proc.threads:
            call = mine.syscall(thread.tid)
            makes = _makes(thread, kernel.arch)
            if makes is None:
                # No stack to compare (a native server's thread, which py-spy cannot read):
                # one the dump saw asleep but the read caught running woke for a moment (a
                # redis-server's 100 ms timer); its next blocked syscall is where it waits.
                if not thread.python and call is None and (
                        thread.state in ("S", "D") or _native_loop(proc, thread)):
                    wanted[(proc.pid, thread.tid)] = None
                continue
            agrees = makes | restart
            # No syscall read of a thread the dump saw asleep: it ran at that moment.
            apart = thread.state in ("S", "D") if call is None else call.nr not in agrees
            if apart:
                wanted[(proc.pid, thread.tid)] = agrees
    if not wanted:
        return kernel
    found = {}
    fds: dict[int, tuple[FdRecord, ...]] = {}
    pending = dict(list(wanted.items())[:SETTLE_MAX_THREADS])
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while pending and time.monotonic() < deadline:
        for (pid, tid), makes in list(pending.items()):
            again = read_syscalls(pid, [tid])
            if again and (makes is None or again[0].nr in makes):
                found[(pid, tid)] = again[0]
                del pending[(pid, tid)]
                if pid not in fds:
                    fds[pid] = read_fd_records(pid)[0]
        if pending:
            time.sleep(SETTLE_PAUSE_S)
    if not found:
        return kernel
    processes = tuple(replace(
        pf, fds=_joined(pf.fds, fds.get(pf.pid, ())), syscalls=tuple(sorted(
            {**{s.tid: s for s in pf.syscalls},
             **{tid: s for (pid, tid), s in found.items() if pid == pf.pid}}.values(),
            key=lambda s: s.tid))) for pf in kernel.processes)
    known = {r.inode for pf in kernel.processes for r in pf.fds}
    new = frozenset(r.inode for records in fds.values() for r in records
                    if r.inode is not None and r.inode not in known
                    and r.target.startswith("socket:"))
    if not new:
        return replace(kernel, processes=processes)
    return replace(kernel, processes=processes,
                   unix_peers=(*kernel.unix_peers, *read_unix_peers(new)),
                   tcp=(*kernel.tcp, *read_tcp_connections(new)))


def _native_loop(proc: Process, thread: Thread) -> bool:
    """``thread`` is the main thread of a program without Python that listens (a redis-server,
    an nginx): its event loop. Seen running by the dump's read of its state, it is read again
    too: a loaded machine keeps such a loop runnable for milliseconds after each timer tick,
    and calm needs its wait over its listening socket (CI, 2026-12-07: a redis-server caught
    runnable by the round, its syscall never read, its idle queue worker called progressing).
    A program's busy native thread keeps its first read: only a listener's loop is asked."""
    return (thread.tid == proc.pid and bool(proc.listening)
            and not any(t.python for t in proc.threads))


def _joined(first: tuple[FdRecord, ...], again: tuple[FdRecord, ...]) -> tuple[FdRecord, ...]:
    """The fd table as first read (with the locks its fdinfo said then: the second read does
    not ask), and the fds the second read found open where the first found none (the new
    connection a loop reads this turn)."""
    numbers = {r.fd for r in first}
    return tuple(sorted((*first, *(r for r in again if r.fd not in numbers)),
                        key=lambda r: r.fd))
