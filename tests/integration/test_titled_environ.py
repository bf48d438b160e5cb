"""A rank's environment after its process title overwrote /proc/PID/environ (setproctitle).

setproctitle moves the environment to the heap and writes a long title, padded with NULs,
over the old one: /proc/PID/environ then holds no ``KEY=value``, and RANK is gone from it.
GIVEN a real process with RANK and WORLD_SIZE set that retitles itself THEN the dump still
reads its rank (from libc's ``__environ``, through /proc/PID/mem), and the process is left
running. GIVEN a worker that sets its own RANK in ``os.environ`` after it started (as
``mp.spawn`` workers do) THEN its live environment gives it, where /proc/PID/environ does not.
GIVEN 3 forked gloo workers that set RANK/LOCAL_RANK/WORLD_SIZE in ``os.environ`` themselves
(tests/targets/env_rank_jobs.py), their rank the reverse of their start order, and rank 1 in
broadcast while ranks 0 and 2 wait in all_reduce THEN each is the rank its live environment
names (not its start order), and rank 1 is the odd one out; GIVEN the same workers all_reducing
in a loop (the healthy twin) THEN the same ranks, progressing.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from support import TARGETS, dump_json, job_dump, running_target

from hangscope.collect import procfs

_TARGET = textwrap.dedent("""
    import os, sys, time
    import setproctitle
    setproctitle.setproctitle("ingest-worker --shard=7 --queue=ingest-high " + "x" * 200)
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()} worker\\n")
    time.sleep(600)
""")

_SELF_RANKED = textwrap.dedent("""
    import os, sys, time
    os.environ.update(RANK="2", WORLD_SIZE="4", LOCAL_RANK="0")
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()} worker\\n")
    time.sleep(600)
""")


def test_a_retitled_rank_keeps_its_rank_and_world(tmp_path: Path) -> None:
    script = tmp_path / "titled.py"
    script.write_text(_TARGET)
    env = dict(os.environ, RANK="5", WORLD_SIZE="8", LOCAL_RANK="1")
    with running_target([sys.executable, str(script), str(tmp_path / "ready")], tmp_path,
                        tags=["worker"], env=env) as job:
        pid = job.pids["worker"]
        assert b"=" not in Path(f"/proc/{pid}/environ").read_bytes()  # the title's doing
        env_read = procfs.read_environ(pid)
        assert env_read is not None and env_read["RANK"] == "5", env_read
        assert env_read["WORLD_SIZE"] == "8" and env_read["LOCAL_RANK"] == "1", env_read
        data = json.loads(dump_json(pid, "--samples", "2", "--window", "0.5"))
        proc = next(p for p in data["processes"] if p["pid"] == pid)
        assert proc["rank"]["global_rank"] == 5, proc
        assert Path(f"/proc/{pid}").exists()


def test_a_worker_that_sets_its_own_rank_is_read_live(tmp_path: Path) -> None:
    script = tmp_path / "self_ranked.py"
    script.write_text(_SELF_RANKED)
    with running_target([sys.executable, str(script), str(tmp_path / "ready")], tmp_path,
                        tags=["worker"]) as job:
        pid = job.pids["worker"]
        assert b"RANK=" not in Path(f"/proc/{pid}/environ").read_bytes()  # the start's
        env_read = procfs.read_environ(pid)
        assert env_read is not None, pid
        assert (env_read["RANK"], env_read["WORLD_SIZE"], env_read["LOCAL_RANK"]) == (
            "2", "4", "0"), env_read
        assert procfs.read_environ(pid, live=False) == {}, "live=False reads the start's"


RANK_JOBS = TARGETS / "env_rank_jobs.py"
RANK_TAGS = ["launcher", "rank0", "rank1", "rank2"]


def _dumped(mode: str, tmp_path: Path) -> tuple[dict, dict[str, int]]:
    return job_dump(mode, tmp_path, RANK_TAGS, RANK_JOBS)


def _ranks(data: dict) -> dict[int, tuple[int, str]]:
    return {p["rank"]["global_rank"]: (p["pid"], p["rank"]["source"]) for p in data["processes"]
            if p["role"] == "rank" and p.get("rank")}


@pytest.mark.extended
def test_workers_that_set_their_rank_in_os_environ_are_that_rank(tmp_path: Path) -> None:
    data, pids = _dumped("mismatch", tmp_path)
    assert _ranks(data) == {r: (pids[f"rank{r}"], "env") for r in range(3)}
    verdict = data["verdict"]
    said = (verdict["kind"], verdict["suspects"], "rank 1 waits in broadcast" in verdict["summary"])
    assert said == ("mismatched_collectives", [pids["rank1"]], True), verdict


@pytest.mark.extended
def test_workers_that_set_their_rank_and_all_reduce_in_a_loop_are_progressing(
        tmp_path: Path) -> None:
    data, pids = _dumped("steady", tmp_path)
    assert _ranks(data) == {r: (pids[f"rank{r}"], "env") for r in range(3)}
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
