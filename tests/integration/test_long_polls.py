"""A long poll is idle, a lost request is hung, on real processes (tests/targets/longpoll_jobs.py).

GIVEN a config service whose handler threads hold each watcher's request in a Condition wait of
at most 25 s, then answer 304 (ray#12302's long poll), THEN the job is idle, never hung: the
kernel says each handler's futex wait has a deadline. GIVEN the same service whose handlers
wait for a publish with no timeout, THEN the watchers' requests are lost: not idle. GIVEN an idle
engine and its output thread both reading their pipe at the head of a loop, THEN idle. GIVEN a
server whose loader thread computes while its launcher polls it, THEN progressing; GIVEN the
same server whose loader thread spins on one line for a flag nobody sets, THEN not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import TARGETS, asleep, dump_json, running_target, settled_dump

JOBS = TARGETS / "longpoll_jobs.py"
TAGS = ["launcher", "server", "watcher0", "watcher1", "watcher2"]


def _dump(mode: str, tmp_path: Path) -> dict:
    ready = tmp_path / "ready"
    argv = [sys.executable, str(JOBS), mode, str(ready), str(tmp_path)]
    with running_target(argv, tmp_path, tags=TAGS, ready_file=ready, timeout=60,
                        ready=lambda t: all(asleep(t.pids[f"watcher{i}"]) for i in range(3))
                        ) as job:
        return json.loads(dump_json(job.launcher))


@pytest.mark.extended
def test_watchers_of_a_long_poll_whose_handlers_wait_with_a_deadline_are_idle(
        tmp_path: Path) -> None:
    data = _dump("longpoll", tmp_path)
    assert data["verdict"]["kind"] == "idle", data["verdict"]


@pytest.mark.extended
def test_watchers_whose_handlers_wait_for_ever_are_not_idle(tmp_path: Path) -> None:
    data = _dump("lost", tmp_path)
    assert data["verdict"]["kind"] not in ("idle", "paused", "progressing"), data["verdict"]


def test_an_idle_engine_and_its_output_thread_both_reading_their_pipe_are_idle(
        tmp_path: Path) -> None:
    """Both ends of an engine's pipe read at the head of their ``while True:`` loops: each
    waits for the other's next message, which is work nobody has sent (not a framing bug)."""
    data, _ = settled_dump(TARGETS / "engine_jobs.py", "idle", tmp_path, ["api", "engine"])
    assert data["verdict"]["kind"] == "idle", data["verdict"]


@pytest.mark.extended
def test_a_server_whose_loader_thread_computes_while_its_launcher_polls_progresses(
        tmp_path: Path) -> None:
    """The server's main thread waits in its select loop; its weight-quantizer thread computes:
    that thread is judged, not the main one, so the slow start-up reads progressing."""
    ready = tmp_path / "ready"
    argv = [sys.executable, str(TARGETS / "loading_jobs.py"), "quantize", str(ready),
            str(tmp_path)]
    with running_target(argv, tmp_path, tags=["launcher", "server"], ready_file=ready,
                        timeout=60) as job:
        data = json.loads(dump_json(job.launcher))
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
    decided = {r["pid"]: r for r in data["progress"]["ranks"]}
    assert decided[job.pids["server"]]["decision"] == "progressing", decided


@pytest.mark.extended
def test_a_server_whose_loader_thread_spins_on_one_line_while_its_launcher_polls_is_not_progressing(
        tmp_path: Path) -> None:
    """The twin: the loader burns its core on one line too, but that line re-checks a
    ``while`` condition (a flag a dead thread was to set): nothing says it computes."""
    ready = tmp_path / "ready"
    argv = [sys.executable, str(TARGETS / "loading_jobs.py"), "spin", str(ready), str(tmp_path)]
    with running_target(argv, tmp_path, tags=["launcher", "server"], ready_file=ready,
                        timeout=60) as job:
        data = json.loads(dump_json(job.launcher))
    assert data["verdict"]["kind"] not in ("progressing", "idle", "paused"), data["verdict"]
    decided = {r["pid"]: r for r in data["progress"]["ranks"]}
    assert decided[job.pids["server"]]["decision"] != "progressing", decided
    assert data["verdict"]["suspects"] == [job.pids["server"]], data["verdict"]
