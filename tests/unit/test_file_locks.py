"""/proc/locks parsing on a real capture (tests/fixtures/locks/proc_locks.txt).

Captured on the development VM with three kinds of lock held at once: an OFD read lock
(F_OFD_SETLK, PID -1), a POSIX lockf with a blocked waiter, and a flock held by one process
with two blocked waiters (the "->" lines; the second waiter is indented one more space).
"""

from __future__ import annotations

import json
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.classify import classify_thread
from hangscope.analyze.evidence.locks import (
    describe_lock_wait,
    file_lock_waits,
    filelock_path,
    python_lock_holder,
)
from hangscope.collect.locks import FileLockRecord, parse_proc_locks
from hangscope.collect.pyspy import parse_dump
from hangscope.model import Category, Job, Process, Snapshot, Thread, VerdictKind
from hangscope.model.serialize import load
from hangscope.model.waits import WaitEvidence

FIXTURES = Path(__file__).parent.parent / "fixtures" / "locks"
CAPTURE = FIXTURES / "proc_locks.txt"


def test_given_real_proc_locks_when_parsed_then_every_kind_holder_and_waiter() -> None:
    records = parse_proc_locks(CAPTURE.read_text())
    assert [(r.index, r.kind, r.pid, r.blocked) for r in records] == [
        (1, "OFDLCK", None, False),
        (2, "POSIX", 13500, False), (2, "POSIX", 13542, True),
        (3, "FLOCK", 10305, False), (3, "FLOCK", 10307, True), (3, "FLOCK", 10306, True),
    ]
    flock = records[3]
    assert flock.device == (0xFE, 0) and flock.inode == 2147657
    assert flock.access == "WRITE" and not flock.mandatory
    assert {r.file_key for r in records[3:]} == {flock.file_key}


def test_given_garbage_lines_when_parsed_then_skipped() -> None:
    assert parse_proc_locks("not a lock line\n\n1: FLOCK\n") == ()


def _snapshot_and_locks(mode: str) -> tuple[Snapshot, tuple[FileLockRecord, ...]]:
    # A real 3-rank job (tests/targets/verdict_jobs.py MODE): its dump and /proc/locks then.
    snap = load(FIXTURES / f"{mode}.dump.json")
    return snap, parse_proc_locks((FIXTURES / f"{mode}.proc_locks.txt").read_text())


def test_given_blocked_flock_waiters_then_mapped_to_the_holder() -> None:
    snap, records = _snapshot_and_locks("flock")
    ranks = {p.rank.global_rank: p.pid for p in snap.ranks if p.rank}
    (wait,) = file_lock_waits(snap.processes, records)
    assert (wait.holder, wait.waiters, wait.polling) == (ranks[0], (ranks[1], ranks[2]), False)
    site = snap.ranks[0].working_thread.site  # type: ignore[union-attr]
    assert site is not None and site.startswith("build_kernel (verdict_jobs.py:")
    assert describe_lock_wait(wait, snap.processes) == (
        f"ranks 1-2 wait for a file lock held by rank 0 (PID {ranks[0]}), which sleeps "
        f"at {site}")


def test_given_polling_filelock_waiters_then_the_one_held_lock_is_theirs() -> None:
    # filelock polls (LOCK_NB + sleep): /proc/locks shows only the holder, no "->" line.
    snap, records = _snapshot_and_locks("filelock")
    assert not any(r.blocked for r in records)
    ranks = {p.rank.global_rank: p for p in snap.ranks if p.rank}
    for waiter in (1, 2):
        thread = ranks[waiter].working_thread
        assert thread is not None and thread.category is Category.LOCK
        assert any("filelock/" in (f.file or "") for f in thread.frames)
    (wait,) = file_lock_waits(snap.processes, records)
    assert wait.holder == ranks[0].pid and wait.polling
    assert wait.waiters == (ranks[1].pid, ranks[2].pid)
    # py-spy --locals gives the path a polling waiter wants (lock_filename).
    (named,) = file_lock_waits(snap.processes, records, {ranks[1].pid: "/x/.lock",
                                                        ranks[2].pid: "/x/.lock"})
    assert named.path == "/x/.lock" and named.holder == ranks[0].pid


def test_given_one_process_of_three_threads_then_the_one_not_waiting_holds() -> None:
    snap, _ = _snapshot_and_locks("flock")
    assert python_lock_holder(snap.ranks[0]) is None  # one thread: no waiter, no holder


def test_given_real_locals_of_a_polling_waiter_then_its_lock_file() -> None:
    # py-spy --locals of a real filelock 4.x waiter (verdict_jobs.py filelock, rank 1).
    threads = json.loads((FIXTURES / "filelock.waiter.locals.json").read_text())
    tid = threads[0]["os_thread_id"]
    assert filelock_path(threads, tid) == "/tmp/tmp3gvn_7tz/job-filelock/.lock"
    assert filelock_path(threads, tid + 1) is None


def _inductor_process(role: str, pid: int, wchan: str) -> Process:
    dump = parse_dump(pid, (FIXTURES / f"inductor_{role}.native.json").read_text(), native=True)
    main = dump.threads[0]
    thread = classify_thread(Thread(tid=main.tid, name=main.name, active=main.active,
                                    frames=main.frames, state="S", wchan=wchan))
    return Process(pid=pid, ppid=1, cmdline=("python", "c.py", "r"), state="S",
                   threads=(thread,), working_tid=thread.tid)


def test_given_inductor_waiting_for_its_cache_lock_then_jit_compile_waiting_for_the_lock() -> None:
    # Two real torch.compile processes sharing one Inductor cache (fixtures README).
    holder = _inductor_process("holder", 18409, "anon_pipe_read")
    waiter = _inductor_process("waiter", 18410, "hrtimer_nanosleep")
    thread = waiter.working_thread
    assert thread is not None and thread.category is Category.JIT_COMPILE
    assert thread.hint is not None and "file lock" in thread.hint
    assert holder.working_thread is not None
    assert holder.working_thread.category is Category.JIT_COMPILE
    records = parse_proc_locks((FIXTURES / "inductor.proc_locks.txt").read_text())
    (wait,) = file_lock_waits([holder, waiter], records)
    assert (wait.waiters, wait.holder, wait.polling) == ((18410,), 18409, True)
    assert describe_lock_wait(wait, [holder, waiter]).startswith(
        "PID 18410 (python) waits for a file lock held by PID 18409 (python), which compiles "
        "a kernel (JIT) at ")


def test_given_inductor_cache_lock_then_the_verdict_is_a_lock_wait_on_the_compiling_holder(
        ) -> None:
    # The same two real processes as one job's snapshot, with the /proc/locks read then.
    holder = _inductor_process("holder", 18409, "anon_pipe_read")
    waiter = _inductor_process("waiter", 18410, "hrtimer_nanosleep")
    records = parse_proc_locks((FIXTURES / "inductor.proc_locks.txt").read_text())
    snap = analyze(Snapshot(created="2026-11-29T14:00:00+00:00", hangscope="test", hosts=(),
                            job=Job(), processes=(holder, waiter),
                            waits=WaitEvidence(file_locks=records)))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.LOCK_WAIT
    assert snap.verdict.summary.startswith(
        "Lock wait: PID 18410 (python) waits for a file lock held by PID 18409 (python), which "
        "compiles a kernel (JIT) at ")
    assert snap.verdict.suspects == (18409,)


def _renumbered(value: object, pids: dict[int, int]) -> object:
    """``value`` (a saved dump's JSON) with its PIDs renumbered."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return pids.get(value, value)
    if isinstance(value, list):
        return [_renumbered(v, pids) for v in value]
    if isinstance(value, dict):
        return {(str(pids[int(k)]) if k.isdigit() and int(k) in pids else k):
                _renumbered(v, pids) for k, v in value.items()}
    return value


def test_given_a_flock_held_across_a_barrier_then_its_holder_whatever_the_pid_order(
        tmp_path: Path) -> None:
    """The extended tier's flock-across-a-barrier job named the uploader once its PIDs had
    wrapped (uploader 319, rank 0 32735): the ring started at the lowest PID. A ring through
    one file lock starts at the lock's holder."""
    raw = json.loads((FIXTURES / "flock_across_barrier.dump.json").read_text())
    wrapped = {7755: 319, 7747: 32734, 7748: 32735, 7749: 32736, 7750: 32737}
    for pids, rank0 in (({}, 7748), (wrapped, 32735)):
        path = tmp_path / f"dump{len(pids)}.json"
        path.write_text(json.dumps(_renumbered(raw, pids)))
        verdict = analyze(load(path)).verdict
        assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
        assert verdict.suspects[0] == rank0, verdict
        assert verdict.summary.startswith(f"Deadlock: Rank 0 (PID {rank0}) waits in barrier"), \
            verdict.summary
