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

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from hangscope.collect.locks import file_keys, read_file_locks
from hangscope.collect.outside import read_outside
from hangscope.collect.procfs import read_kernel_waits
from hangscope.collect.pyspy import dump_locals
from hangscope.frameworks import OBJECT_WAITS
from hangscope.model import Process
from hangscope.model.waits import Hosted, KernelWaits, LocalsRead, WaitEvidence

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
