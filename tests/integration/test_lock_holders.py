"""Ranks blocked on a file lock name the holder and the file (issue 11, item 2).

GIVEN a real 3-rank job whose rank 0 holds the lock on WORKDIR/.lock (the JIT-cache pattern)
while ranks 1-2 wait for it, WHEN hangscope dumps it and /proc/locks is read, THEN ranks 1-2
are in a lock and the conclusion names rank 0, its PID, the file and where rank 0 is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import dump_json, show_text, verdict_job

from hangscope.analyze.evidence.locks import (
    describe_lock_wait,
    file_lock_waits,
    filelock_path,
    python_lock_holder,
)
from hangscope.collect.locks import read_file_locks
from hangscope.collect.pyspy import dump_locals
from hangscope.model.serialize import from_dict


@pytest.mark.extended
@pytest.mark.parametrize("mode", ["filelock", "flock"])
def test_given_ranks_waiting_for_a_file_lock_then_holder_and_file_named(
        mode: str, tmp_path: Path) -> None:
    with verdict_job(mode, tmp_path, ["holder", "waiter1", "waiter2"]) as job:
        data = dump_json(job.launcher)
        snap = from_dict(json.loads(data))
        records = read_file_locks(p.pid for p in snap.processes)
        # A polling waiter's file from its locals (its main thread's id is its PID).
        wanted = {pid: filelock_path(dump_locals(pid) or [], pid)
                  for pid in (job.pids["waiter1"], job.pids["waiter2"])}
    if mode == "filelock":
        assert set(wanted.values()) == {str(job.workdir / ".lock")}
        assert file_lock_waits(snap.processes, records, wanted) == file_lock_waits(
            snap.processes, records)
    else:
        assert set(wanted.values()) == {None}  # fcntl.flock: no filelock frame
    ranks = {p.rank.global_rank: p for p in snap.ranks if p.rank is not None}
    for waiter in (1, 2):
        thread = ranks[waiter].working_thread
        assert thread is not None and thread.category.value == "lock", thread
    waits = file_lock_waits(snap.processes, records)
    assert len(waits) == 1
    wait = waits[0]
    holder = job.pids["holder"]
    assert wait.holder == holder
    assert wait.waiters == (job.pids["waiter1"], job.pids["waiter2"])
    assert wait.path == str(job.workdir / ".lock")
    assert wait.polling is (mode == "filelock")
    text = describe_lock_wait(wait, snap.processes)
    assert text == (f"ranks 1-2 wait for the file lock on .../{job.workdir.name}/.lock held by "
                    f"rank 0 (PID {holder}), which sleeps at build_kernel "
                    f"(verdict_jobs.py:{_line('time.sleep(seconds)')})")
    # What the user sees: the dump's own verdict, from the /proc/locks (and --locals) it read.
    verdict = json.loads(data)["verdict"]
    assert verdict["kind"] == "lock_wait", verdict
    assert verdict["summary"] == f"Lock wait: {text}.", verdict
    assert verdict["suspects"] == [holder]
    waits = json.loads(data)["waits"]
    assert any(r["pid"] == holder and not r["blocked"] for r in waits["file_locks"])
    if mode == "filelock":  # the polling waiters' file, from their locals
        assert {r["pid"]: r["lock_file"] for r in waits["locals"]} == {
            job.pids[w]: str(job.workdir / ".lock") for w in ("waiter1", "waiter2")}
    report = show_text(data, tmp_path)
    assert "LOCK WAIT" in report and f"held by rank 0 (PID {holder})" in report, report


def _line(text: str) -> int:
    source = (Path(__file__).resolve().parent.parent / "targets" / "verdict_jobs.py").read_text()
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_given_threads_waiting_on_a_python_lock_then_the_holder_thread_named(
        tmp_path: Path) -> None:
    with verdict_job("pylock", tmp_path, ["waiter1", "waiter2"]) as job:
        snap = from_dict(json.loads(dump_json(job.launcher)))
    (proc,) = snap.processes
    by_name = {t.name: t for t in proc.threads}
    assert by_name["waiter1"].category.value == "lock"
    holder = python_lock_holder(proc)
    assert holder is not None and holder.name == "holder", holder
