"""Progress a poll cannot fake, healthy jobs that must not read hung, the whole job from any
PID, and reports that fit the job (issue 17 items 4, 6, 7, 9), on real processes
(tests/targets/calm_jobs.py, each mode written from the report its docstring cites).

GIVEN a client polling ``select(..., 1.0)`` for a reply its server never sends, or a process
polling a TCPStore key nobody sets, THEN the poller is stuck, never "progressing" or "slow".
GIVEN a driver waiting for a worker that computes, a server with no request in flight and its
sleeping client, or a process sleeping between phases, THEN the verdict is progressing, idle or
paused and no word of the text or JSON report says "stuck". GIVEN a non-Python grandchild's, a
server's or a detached client's PID, THEN every process of the job is found. GIVEN a process of
1,000 threads outside torch.distributed, THEN its text report is under 300 lines and has no
collectives section and no NCCL or Flight Recorder note.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, dump_json, run_cli, show_text, verdict_job

JOBS = TARGETS / "calm_jobs.py"


def _dump(mode: str, tmp_path: Path, tags: list[str], target: str, *extra: str,
          timeout: float = 60) -> tuple[dict[str, int], dict, str, str]:
    """Run a calm_jobs.py job, dump it from ``target``'s PID: (PIDs, JSON, raw JSON, text)."""
    with verdict_job(mode, tmp_path, tags, timeout=timeout, jobs=JOBS) as job:
        raw = dump_json(job.pids[target], *extra)
    return job.pids, json.loads(raw), raw, show_text(raw, tmp_path)


def _decision(data: dict, pid: int) -> str:
    return next(r["decision"] for r in data["progress"]["ranks"] if r["pid"] == pid)


@pytest.mark.extended
def test_given_a_one_second_select_loop_that_gets_no_reply_then_it_is_stuck(
        tmp_path: Path) -> None:
    """CPython's select idiom (a 1 s timeout in a loop) waiting for a peer that waits too."""
    pids, data, _, text = _dump("select_loop", tmp_path, ["client", "server"], "client",
                                "--window", "3")
    assert _decision(data, pids["client"]) == "stuck", data["progress"]
    assert "polling without progress" in text, text
    assert data["verdict"]["kind"] not in ("progressing", "idle", "paused"), data["verdict"]
    assert "progressing" not in text.lower(), text


@pytest.mark.extended
def test_given_a_tcpstore_poll_for_a_key_nobody_sets_then_the_poller_is_stuck(
        tmp_path: Path) -> None:
    """pytorch/pytorch#83986: ranks polling the store for a key the owner never sets."""
    pids, data, _, text = _dump("store_poll", tmp_path, ["owner", "poller"], "poller",
                                timeout=120)
    assert _decision(data, pids["poller"]) == "stuck", data["progress"]
    assert "polling without progress" in text, text
    # (The store's owner answers the polls from its server thread: that I/O still reads as
    # the owner's progress; the wait-for graph of the store edge is what tells them apart.)


@pytest.mark.extended
def test_given_a_driver_waiting_for_a_computing_worker_then_slow_and_never_stuck(
        tmp_path: Path) -> None:
    pids, data, raw, text = _dump("slow", tmp_path, ["driver", "worker"], "driver")
    assert data["verdict"]["kind"] == "progressing", data["verdict"]
    # progressing; "slow" (runnable, starved) only when the machine is overloaded
    assert _decision(data, pids["worker"]) in ("progressing", "slow"), data["progress"]
    assert _decision(data, pids["driver"]) == "waiting", data["progress"]
    assert "stuck" not in raw.lower() and "stuck" not in text.lower(), text


@pytest.mark.extended
def test_given_a_server_with_no_request_and_a_sleeping_client_then_idle_never_stuck(
        tmp_path: Path) -> None:
    pids, data, raw, text = _dump("idle", tmp_path, ["server", "client"], "client")
    assert data["verdict"]["kind"] == "idle", data["verdict"]
    assert {p["pid"] for p in data["processes"]} >= {pids["server"], pids["client"]}
    assert "none in flight" in text, text
    assert "stuck" not in raw.lower() and "stuck" not in text.lower(), text


def test_given_a_process_sleeping_between_phases_then_paused_never_stuck(
        tmp_path: Path) -> None:
    _, data, raw, text = _dump("paused", tmp_path, ["sleeper"], "sleeper")
    assert data["verdict"]["kind"] == "paused", data["verdict"]
    assert "stuck" not in raw.lower() and "stuck" not in text.lower(), text


@pytest.mark.extended
def test_given_any_pid_of_a_script_server_helper_and_detached_client_then_all_are_found(
        tmp_path: Path) -> None:
    tags = ["script", "server", "helper", "client"]
    with verdict_job("family", tmp_path, tags, jobs=JOBS) as job:
        everyone = {job.pids[t] for t in tags}
        for target in ("helper", "client"):  # a non-Python grandchild; a sibling outside
            data = json.loads(dump_json(job.pids[target], "--samples", "2"))
            found = {p["pid"] for p in data["processes"]}
            assert everyone <= found, (target, everyone - found)


@pytest.mark.extended
def test_given_a_thousand_threads_outside_torch_distributed_then_a_short_report(
        tmp_path: Path) -> None:
    """Issue 17's 1,000-thread process whose report ran to 13,018 lines."""
    _, data, _, _ = _dump("threads", tmp_path, ["pool"], "pool", "--samples", "2",
                          timeout=120)
    path = tmp_path / "threads.json"
    path.write_text(json.dumps(data))
    done = run_cli("show", str(path), env={"COLUMNS": "120"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) < 300, len(lines)
    # The 33 threads queued on the guard wait for the one thread inside ``with guard:`` (its
    # source says so), which waits on a socket: a chain, not a lock-order inversion.
    text = " ".join(done.stdout.replace("│", " ").split())
    assert "33 threads of PID" in text and "probably held by thread Thread-1 (reader)" in text, \
        done.stdout
    assert "lock-order inversion" not in text, done.stdout
    assert "Collectives" not in done.stdout and "NCCL" not in done.stdout, done.stdout
    assert "Flight Recorder" not in done.stdout
    assert data["collectives"] == []


@pytest.mark.extended
def test_given_a_pool_whose_worker_died_then_workers_are_no_ranks_sited_in_the_child(
        tmp_path: Path) -> None:
    """bpo-22393: a Pool worker killed mid-task; the workers idle, the driver waits. The
    workers are plain multiprocessing children: no ranks, and each one's site is its own code
    above the fork point, never the parent's ``with Pool()`` line it inherited."""
    pids, data, _, _ = _dump("pool", tmp_path, ["driver"], "driver", "--samples", "2")
    workers = [p for p in data["processes"] if p["pid"] != pids["driver"]
               and p["ppid"] == pids["driver"] and p["threads"]]
    assert workers, data["processes"]
    assert all(p["role"] != "rank" and p["rank"] is None for p in workers), workers
    for proc in workers:
        working = next(t for t in proc["threads"] if t["tid"] == proc["working_tid"])
        assert "calm_jobs.py" not in (working["site"] or ""), working["site"]
        assert "pool.py" in (working["site"] or ""), working["site"]
