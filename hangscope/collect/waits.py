"""The job's file locks and its waiters' locals: ``cat /proc/locks``; ``py-spy dump --locals``.

/proc/locks is one cheap read per snapshot. ``py-spy dump --locals --json`` is asked only of
the processes whose working thread polls a ``filelock`` (its file is a local: /proc/locks shows
only the holder) or waits in a send/recv (its peer is a local of the c10d frame); it costs what
a plain dump costs (tests/fixtures/p2p/README.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from hangscope.analyze.classify import classify_process
from hangscope.analyze.locks import filelock_path, polls_filelock
from hangscope.analyze.p2p import in_p2p, p2p_call_of_thread
from hangscope.collect.locks import read_file_locks
from hangscope.collect.pyspy import dump_locals
from hangscope.model import Process
from hangscope.wait_evidence import LocalsRead, WaitEvidence

#: At most this many --locals reads per snapshot (a 1,000-rank pipeline: the first ones tell).
MAX_LOCALS = 64


def wants_locals(proc: Process) -> bool:
    """Its working thread polls a filelock or waits in a point-to-point op."""
    # Never a process in D: a ptrace attach to it may wait for the kernel (sampler.py).
    return not proc.is_exited and proc.state != "D" and (polls_filelock(proc) or in_p2p(proc))


def _locals(proc: Process, timeout: float, pyspy: str | None) -> LocalsRead:
    threads = dump_locals(proc.pid, timeout=timeout, pyspy=pyspy)
    if threads is None:
        return LocalsRead(proc.pid, error="py-spy dump --locals gave no answer")
    tid = proc.working_tid
    return LocalsRead(proc.pid, lock_file=filelock_path(threads, tid),
                      p2p=p2p_call_of_thread(threads, tid))


def read_waits(procs: Sequence[Process], timeout: float = 5.0, pyspy: str | None = None,
               with_locals: bool = True) -> WaitEvidence:
    """/proc/locks of the job's live processes, and --locals of its lock and p2p waiters
    (``with_locals`` False: --nonblocking, never pause a target)."""
    records = read_file_locks(p.pid for p in procs if not p.is_exited)
    # Classified here (pure, ~µs a process) for the working thread; analyze() does it again.
    asked = [c for p in procs if wants_locals(c := classify_process(p))][:MAX_LOCALS]
    if not asked or not with_locals:
        return WaitEvidence(file_locks=records)
    with ThreadPoolExecutor(max_workers=min(8, len(asked)),
                            thread_name_prefix="hangscope-locals") as pool:
        reads = tuple(pool.map(lambda p: _locals(p, timeout, pyspy), asked))
    return WaitEvidence(file_locks=records, locals=reads)
