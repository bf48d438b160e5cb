"""The job's wait facts: ``cat /proc/locks``, ``ls -l /proc/PID/fd{,info}``,
``cat /proc/PID/task/*/syscall``, ``ss -xtp``, ``py-spy dump --locals``.

/proc/locks and the kernel wait facts (fds with their ends and locks, blocked syscalls, socket
peers: collect/procfs.py ``read_kernel_waits``) are cheap reads of the job's processes.
``py-spy dump --locals --json`` is asked only of the processes the live pipeline names (it
decides whom: the ranks polling a ``filelock``, waiting in send/recv or in a store get/wait,
analyze/locals_wanted.py);
it costs what a plain dump costs (tests/fixtures/p2p/README.md). This module only reads: what
the locals mean is the caller's ``interpret``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from hangscope.collect.locks import read_file_locks
from hangscope.collect.procfs import read_kernel_waits
from hangscope.collect.pyspy import dump_locals
from hangscope.model import Process
from hangscope.model.waits import LocalsRead, WaitEvidence

#: At most this many --locals reads per snapshot (a 1,000-rank pipeline: the first ones tell).
MAX_LOCALS = 64

#: (PID, the py-spy --locals threads of it) -> what they say, the caller's reading.
Interpret = Callable[[int, Sequence[object]], LocalsRead]


def syscall_tids(proc: Process) -> list[int]:
    """The threads whose syscall can name what they wait on: not those parked on a futex
    (a lock, a condition, the GIL: no fd; the stacks tell those), nor running ones. A
    1,000-thread pool is mostly futex waiters: one read each would cost ~0.2 ms."""
    return [t.tid for t in proc.threads
            if t.state in ("S", "D", None) and not (t.wchan or "").startswith("futex")]


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
    if not asked or interpret is None:
        return WaitEvidence(file_locks=records, kernel=kernel)
    with ThreadPoolExecutor(max_workers=min(8, len(asked)),
                            thread_name_prefix="hangscope-locals") as pool:
        reads = tuple(pool.map(lambda pid: _locals(pid, interpret, timeout, pyspy), asked))
    return WaitEvidence(file_locks=records, locals=reads, kernel=kernel)
