"""A rank's environment after its process title overwrote /proc/PID/environ (setproctitle).

setproctitle moves the environment to the heap and writes a long title, padded with NULs,
over the old one: /proc/PID/environ then holds no ``KEY=value``, and RANK is gone from it.
GIVEN a real process with RANK and WORLD_SIZE set that retitles itself THEN the dump still
reads its rank (from libc's ``__environ``, through /proc/PID/mem), and the process is left
running. GIVEN a worker that sets its own RANK in ``os.environ`` after it started (as
``mp.spawn`` workers do) THEN its live environment gives it, where /proc/PID/environ does not.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from support import dump_json, running_target

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
