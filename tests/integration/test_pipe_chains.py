"""Wait chains through a shell's wait(-1), a thread pool's children and a detached daemon.

GIVEN a real job of tests/targets/pipe_chain_jobs.py, hung the way a real report describes
(each test cites it), WHEN ``hangscope dump PID --format json`` reads it, THEN the verdict
names the pattern, its suspects and the chain. No rule reads these jobs' names: the sentences
quote them only because they are the jobs' own frames.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import TARGETS, dump_json, settled_dump, verdict_job

JOBS = TARGETS / "pipe_chain_jobs.py"
FAST = ("--samples", "2", "--window", "0.5")


def _edges(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in data["wait_graph"]["edges"] if e["kind"] == kind]


@pytest.mark.extended
def test_a_shell_between_popen_wait_and_a_writer_on_a_full_pipe_closes_the_cycle(
        tmp_path: Path) -> None:
    """Real report: google/turbinia#945 (Popen.wait with stdout=PIPE, here through
    ``sh -c``: the shell waits for any child, the child blocks on the full pipe)."""
    with verdict_job("shell_pipe", tmp_path, ["shell", "writer", "parent"], jobs=JOBS) as job:
        data = json.loads(dump_json(job.launcher, *FAST))
        pids = dict(job.pids)
    parent, shell, writer = pids["parent"], pids["shell"], pids["writer"]
    kids = [e for e in _edges(data, "child") if e["pid"] == shell]
    # wait4(-1): an edge to its live child, not to "PID 4294967295" outside the job.
    assert [e["to_pid"] for e in kids] == [writer], data["wait_graph"]["edges"]
    assert "wait4(any child)" in kids[0]["how"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    summary = verdict["summary"]
    assert f"(PID {parent}) waits for its child PID {shell} (sh)" in summary, summary
    assert f"PID {shell} (sh) waits for its child PID {writer}" in summary, summary
    assert "is blocked writing its stdout (pipe" in summary and "table_writer" in summary
    assert "the pipe is full" in summary and "Popen.wait() with stdout=PIPE" in summary
    assert "communicate()" in summary and "send it to a file" in summary
    assert "outside the job" not in summary


@pytest.mark.extended
def test_children_of_a_thread_pool_reading_a_stdin_pipe_never_closed_are_the_suspects(
        tmp_path: Path) -> None:
    """Real report: artwist-polyakov/polyakov-claude-skills#103 (a CLI run from a non-TTY
    parent reads stdin to EOF; the parent keeps the pipe open and never writes it)."""
    with verdict_job("stdin_pool", tmp_path, ["grader0", "grader1", "parent"],
                     jobs=JOBS) as job:
        data = json.loads(dump_json(job.launcher, *FAST))
        pids = dict(job.pids)
    parent, graders = pids["parent"], [pids["grader0"], pids["grader1"]]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert sorted(verdict["suspects"]) == sorted(graders), verdict
    summary = verdict["summary"]
    assert summary.startswith("A prompt nobody answers: "), summary
    assert "waits for input on its stdin (pipe" in summary and "grader (pipe_chain_jobs.py:" \
        in summary
    assert f"PID {parent} (python) holds its write end, and never writes it nor closes it" \
        in summary
    # The one that holds it waits on them in a pool thread, not in its main thread.
    # (Which pool thread started which child is the pool's choice: grade_0 or grade_1.)
    assert re.search(rf"thread grade_[01] of PID {parent} \(python\) is blocked reading pipe",
                     summary), summary
    other = [pid for pid in graders if f"PID {pid} (python) waits for input" not in summary]
    assert f"and so does PID {other[0]} (python)" in summary, summary
    assert "stdin=subprocess.DEVNULL" in summary


def test_a_flock_held_by_a_detached_daemon_whose_worker_died_leads_to_that_daemon(
        tmp_path: Path) -> None:
    """Real report: instructlab/training#566 (a rank blocked saving a checkpoint outside any
    collective); here the checkpoint lock is held by a daemon started with setsid, whose
    worker thread died (its traceback in its own log), so its main thread never lets go."""
    with verdict_job("flock_daemon", tmp_path, ["daemon", "waiter", "parent"],
                     jobs=JOBS) as job:
        daemon = job.pids["daemon"]
        job.also_kill.append(daemon)  # in its own session: the group kill misses it
        data = json.loads(dump_json(job.launcher, *FAST))
        pids = dict(job.pids)
    waiter = pids["waiter"]
    # Discovery takes in the lock's holder although it is no descendant of the job.
    assert daemon in {p["pid"] for p in data["processes"]}, [p["pid"] for p in data["processes"]]
    lock = [e for e in _edges(data, "file_lock") if e["pid"] == waiter]
    assert lock and lock[0]["to_pid"] == daemon, data["wait_graph"]["edges"]
    verdict = data["verdict"]
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"][0] == daemon, verdict
    summary = verdict["summary"]
    assert "inherited locked across fork" not in summary  # a kernel lock has a named holder
    assert f"PID {daemon} (python) waits in Event.wait" in summary, summary
    assert "thread pusher died of an exception" in summary
    assert f"PID {waiter} (python) waits for the FLOCK lock on" in summary
    assert f"held by PID {daemon} (python)" in summary
    assert "SHARD_SYNC_TARGET" in summary  # the daemon's log: its stdout file


@pytest.mark.extended
def test_a_worker_and_its_child_writing_each_others_pipes_behind_a_queue_are_the_cycle(
        tmp_path: Path) -> None:
    """Real reports: ansible/ansible#3991, aws/s2n-tls#831 (a process writes its child's stdin
    before it reads the child's stdout: both pipes fill). Here behind a coordinator whose
    result queue every worker's inherited pipe end could write: the idle workers wait for the
    coordinator's next task, so the cycle is the transcoder and its child, not the queues."""
    data, pids = settled_dump(JOBS, "transcode_pool", tmp_path,
                              ["coordinator", "transcoder", "tr"])
    transcoder, tr = pids["transcoder"], pids["tr"]
    verdict = data["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert set(verdict["suspects"]) <= {transcoder, tr} and verdict["suspects"], verdict
    summary = verdict["summary"]
    assert re.search(rf"PID {transcoder} \([^)]*\) is blocked writing pipe \d+ .*which only "
                     rf"PID {tr} \(tr\) reads", summary), summary
    assert f"PID {tr} (tr) is blocked writing its stdout" in summary, summary
    assert "both pipes are full" in summary and "communicate(input=...)" in summary, summary
    assert f"PID {pids['coordinator']}" in summary, summary
