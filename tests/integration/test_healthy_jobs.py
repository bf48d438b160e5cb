"""Healthy jobs are never called hung (issue 17: slow, idle and paused jobs), and their hung
twins still are, on real processes (tests/targets/healthy_jobs.py).

GIVEN three gloo ranks where rank 1 builds a vocabulary (calls that come and go, a checkpoint
written) while ranks 0 and 2 wait in all_reduce, THEN the verdict is progressing (slow, not
hung), names rank 1 and its frame, and says the others wait for it; GIVEN the same job with
rank 1 spinning in one loop, THEN it stays a straggler. GIVEN an idle asyncio server whose
forked workers read their task pipes, THEN idle; GIVEN the same server and a client whose
request it dropped, THEN not idle. GIVEN a coordinator asleep between phases while its workers
wait for tasks, THEN paused. GIVEN a job started as ``python job.py | cut``, THEN ``cut`` and
the shell are no part of it. GIVEN two jobs that share an inherited stdin pipe nobody
writes, THEN neither is part of the other; a reader of one's stdout is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import (
    FAST_WINDOW,
    TARGETS,
    dump_json,
    poll,
    read_ready,
    running_target,
    show_text,
    verdict_job,
)

JOBS = TARGETS / "healthy_jobs.py"
HUNG = ("straggler", "deadlock", "wait_chain", "all_waiting", "unknown", "local_deadlock")


def _dump(mode: str, tmp_path: Path, tags: list[str], target: str,
          timeout: float = 120) -> tuple[dict[str, int], dict[str, Any], str]:
    with verdict_job(mode, tmp_path, tags, timeout=timeout, jobs=JOBS) as job:
        raw = dump_json(job.pids[target])
    return dict(job.pids), json.loads(raw), show_text(raw, tmp_path)


@pytest.mark.extended
@pytest.mark.xdist_group("progress")
def test_given_a_rank_building_a_vocabulary_while_the_others_all_reduce_then_slow_not_hung(
        tmp_path: Path) -> None:
    pids, data, text = _dump("vocab", tmp_path, ["launcher", "rank0", "rank1", "rank2"],
                             "launcher")
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert verdict["suspects"] == [pids["rank1"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Slow, not hung: rank 1 "), summary
    assert "healthy_jobs.py:" in summary and "call chains" in summary, summary
    assert "Ranks 0,2 wait in all_reduce" in summary or "Ranks 0, 2 wait" in summary, summary
    assert "STRAGGLER" not in text, text


@pytest.mark.extended
@pytest.mark.xdist_group("progress")
def test_given_a_rank_spinning_in_one_loop_while_the_others_all_reduce_then_a_straggler(
        tmp_path: Path) -> None:
    pids, data, _ = _dump("spin", tmp_path, ["launcher", "rank0", "rank1", "rank2"], "launcher")
    verdict = data["verdict"]
    assert verdict["kind"] == "straggler", verdict
    assert verdict["suspects"] == [pids["rank1"]], verdict
    assert "pad_forever (healthy_jobs.py:" in verdict["summary"], verdict


@pytest.mark.extended
@pytest.mark.xdist_group("progress")
@pytest.mark.parametrize(("mode", "tags", "target"), [
    ("cpu_loader", ["main", "worker"], "main"),
    ("polled_worker", ["driver", "worker"], "driver"),
])
def test_given_a_loop_waiting_on_a_worker_that_computes_then_progressing(
        mode: str, tags: list[str], target: str, tmp_path: Path) -> None:
    """A training loop over a DataLoader whose worker computes each item in plain Python
    (Lightning#17410's input-bound loop; blind round 15's 07 read "wait chain"), and a driver
    polling a worker's pipe every 50 ms: the worker's lines move, so whoever waits on it
    waits for work being done. No hang, nobody blamed."""
    pids, data, _ = _dump(mode, tmp_path, tags, target)
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert not verdict["suspects"], verdict
    assert f"PID {pids['worker']}" in verdict["summary"], verdict


@pytest.mark.extended
def test_given_a_consumer_taking_a_socket_s_ticks_then_progressing(tmp_path: Path) -> None:
    """A feed sends a 4-byte tick every 20 ms and a consumer recv()s each: both sleep on one
    line and wake 50 times a second, and /proc/PID/io counts no byte of send/recv. Read as
    two polls before ("Blocked: ... waits on another process"); a blocking recv with no
    timer returns only when bytes came: the consumer's waits complete."""
    pids, data, _ = _dump("ticks", tmp_path, ["feed", "consumer"], "consumer")
    verdict = data["verdict"]
    assert verdict["kind"] == "progressing", verdict
    assert not verdict["suspects"], verdict
    consumer = next(r for r in data["progress"]["ranks"] if r["pid"] == pids["consumer"])
    assert consumer["decision"] == "progressing", consumer
    assert "a read of a socket with no timer, ended " in consumer["reason"], consumer


@pytest.mark.extended
def test_given_an_idle_asyncio_server_and_workers_reading_their_task_pipes_then_idle(
        tmp_path: Path) -> None:
    pids, data, text = _dump("asyncio_pool", tmp_path, ["server", "worker0", "worker1"],
                             "server")
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", verdict
    for tag in ("server", "worker0", "worker1"):
        assert f"PID {pids[tag]} is idle" in verdict["summary"], verdict
    assert f"waits for work from PID {pids['server']}" in text, text
    assert "stuck" not in text.lower(), text


@pytest.mark.extended
def test_given_the_same_server_and_a_client_whose_request_it_dropped_then_not_idle(
        tmp_path: Path) -> None:
    pids, data, _ = _dump("asyncio_lost", tmp_path, ["server", "worker0", "worker1", "client"],
                          "server")
    verdict = data["verdict"]
    # The workers' idle task pipes beside it hide nothing: the client's request was lost.
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [pids["server"]], verdict
    assert f"PID {pids['client']} (python) waits for a reply on TCP" in verdict["summary"]


@pytest.mark.extended
def test_given_a_coordinator_asleep_between_phases_and_its_waiting_workers_then_paused(
        tmp_path: Path) -> None:
    pids, data, text = _dump("phases", tmp_path, ["coordinator", "worker0", "worker1"],
                             "coordinator")
    verdict = data["verdict"]
    assert verdict["kind"] == "paused", verdict
    assert f"PID {pids['coordinator']} is paused" in verdict["summary"], verdict
    assert f"PID {pids['worker0']} is idle" in verdict["summary"], verdict
    assert "stuck" not in text.lower(), text


@pytest.mark.extended
def test_given_a_job_piped_into_cut_by_its_shell_then_the_pipeline_is_no_part_of_it(
        tmp_path: Path) -> None:
    workdir = tmp_path / "job"
    workdir.mkdir()
    ready = workdir / "ready"
    # The shell of a pipeline: the job's stdout goes to `cut`, beside it in one group.
    argv = ["bash", "-c", f"{sys.executable} {JOBS} phases {ready} {workdir} | cut -c1-80"]
    with running_target(argv, workdir, tags=["coordinator", "worker0", "worker1"],
                        ready_file=ready) as job:
        data = json.loads(dump_json(job.pids["coordinator"]))
        shell = job.launcher
    found = {p["pid"] for p in data["processes"]}
    assert shell not in found, data["processes"]
    assert not [p for p in data["processes"] if p["cmdline"][:1] == ["cut"]], found
    assert data["verdict"]["kind"] == "paused", data["verdict"]


def test_two_jobs_reading_one_inherited_stdin_pipe_are_not_one_job(tmp_path: Path) -> None:
    """Two jobs a shell started with one stdin pipe (neither writes it) are strangers; a process
    reading the job's stdout pipe is its peer, though it sits in a session of its own."""
    shared_r, shared_w = os.pipe()  # both jobs' stdin
    out_r, out_w = os.pipe()  # job A's stdout, read by C
    ready = tmp_path / "ready"
    code = ("import os, sys, time; open(sys.argv[1], 'a').write(f'{os.getpid()} {sys.argv[2]}\\n');"
            " time.sleep(600)")
    fds = {"a": (shared_r, out_w), "b": (shared_r, None), "c": (out_r, None)}
    procs = []
    try:
        for tag, (stdin, stdout) in fds.items():
            procs.append(subprocess.Popen([sys.executable, "-c", code, str(ready), tag],
                                          stdin=stdin, stdout=stdout, start_new_session=True))
        for fd in (shared_r, shared_w, out_r, out_w):  # the shell keeps no end
            os.close(fd)
        pids = poll(lambda: found if len(found := read_ready(ready)) == 3 else None,
                    "three processes ready")
        data = json.loads(dump_json(pids["a"], *FAST_WINDOW))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    found = {p["pid"] for p in data["processes"]}
    assert pids["c"] in found, data["processes"]
    assert pids["b"] not in found, data["processes"]
