"""A real uvicorn server with 2 workers, idle (tests/targets/frameworks/uvicorn_workers.py).

GIVEN ``uvicorn --workers 2`` that nobody sends a request, dumped by its master's PID (the one
``ps`` shows first) THEN the job is idle, not progressing and not blocked: the master waits in
uvicorn's supervisor loop and its pings to the workers (a few bytes over a pipe every 0.5 s)
are its own ticks, not the job's data; its workers accept on the socket it opened (blind round
23's 07 read "progressing", decided by the master's health checks).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import TARGETS, dump_json, poll, read_ready, running_target

pytestmark = pytest.mark.frameworks

JOB = TARGETS / "frameworks" / "uvicorn_workers.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_idle_uvicorn_server_with_workers_is_idle(tmp_path: Path) -> None:
    workdir = tmp_path / "uvicorn"
    ready = workdir / "ready"
    argv = [sys.executable, str(JOB), str(ready), str(_free_port())]

    def both_workers(_target: object) -> bool:
        return ready.exists() and sum(1 for line in ready.read_text().splitlines()
                                      if line.endswith(" worker")) == 2

    with running_target(argv, workdir, ready=both_workers, timeout=60) as job:
        workers = {int(line.split()[0]) for line in ready.read_text().splitlines()}
        assert len(read_ready(ready)) >= 1
        data = json.loads(dump_json(job.launcher))
    verdict = data["verdict"]
    assert verdict["kind"] == "idle", verdict
    assert verdict["suspects"] == [], verdict
    assert f"PID {job.launcher} is idle at Multiprocess.run (uvicorn/supervisors/" \
        "multiprocess.py:" in verdict["summary"], verdict
    assert all(f"PID {pid} is idle" in verdict["summary"] for pid in workers), verdict


def test_an_idle_tensor_parallel_server_is_idle_not_a_straggler(tmp_path: Path) -> None:
    """Rank 0 serves HTTP (FastAPI on uvicorn) and broadcasts each request to rank 1, whose
    loop waits in ``broadcast_object_list`` for the next one (vllm#5084's worker loop; blind
    round 27's 08). Nobody asks: idle. Rank 0's AnyIO worker thread, which ran the sync
    endpoint once, waits in its pool's loop for the next task: plumbing, not where rank 0 is
    (it read "straggler: rank 0 waits on a lock at WorkerThread.run")."""
    workdir = tmp_path / "tp_server"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--master-port", str(_free_port()), str(TARGETS / "frameworks" / "tp_server.py"),
            str(workdir / "ready"), str(_free_port())]
    with running_target(argv, workdir, tags=["rank0", "rank1"], timeout=90) as job:
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "idle", verdict
    assert verdict["suspects"] == [], verdict
    summary = verdict["summary"]
    assert f"rank 1 (PID {job.pids['rank1']}) is idle at work (tp_server.py:" in summary, summary


LIFESPAN = TARGETS / "frameworks" / "uvicorn_lifespan.py"


def _lifespan(mode: str, tmp_path: Path) -> dict[str, object]:
    workdir = tmp_path / mode
    port = _free_port()
    argv = [sys.executable, str(LIFESPAN), mode, str(workdir / "ready"), str(port)]

    def served(_target: object) -> bool:  # the twin that finishes its startup: it listens
        if mode != "task":
            return True
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    with running_target(argv, workdir, tags=["server"], ready=served, timeout=60) as job:
        verdict: dict[str, object] = json.loads(dump_json(job.launcher))["verdict"]
        verdict["server"] = job.pids["server"]
    return verdict


def test_a_lifespan_that_awaits_its_endless_consumer_never_finishes_starting(
        tmp_path: Path) -> None:
    """The lifespan awaits its update consumer before ``yield`` (uvicorn#2751, blind round
    28's 07): uvicorn logged "Waiting for application startup." and binds nothing; its loop
    wakes for each update, which read "progressing"."""
    verdict = _lifespan("awaited", tmp_path)
    assert verdict["kind"] == "wait_chain", verdict
    assert verdict["suspects"] == [verdict["server"]], verdict
    summary = str(verdict["summary"])
    assert summary.startswith(f"Startup never finished: PID {verdict['server']} (python) "
                              "logged \"Waiting for application startup.\""), summary
    assert "asyncio.create_task" in summary, summary


@pytest.mark.parametrize(("mode", "kind"), [("task", "idle"), ("loading", "progressing")])
def test_a_lifespan_that_yields_or_computes_is_not_a_hung_startup(
        mode: str, kind: str, tmp_path: Path) -> None:
    verdict = _lifespan(mode, tmp_path)
    assert verdict["kind"] == kind, verdict


def test_workers_whose_app_import_deadlocks_on_its_own_pool_are_hung(tmp_path: Path) -> None:
    """Blind round 41's 04 (python/cpython#155890): each worker's import of the app builds an
    index on a ProcessPoolExecutor whose feeder thread waits for the module's import lock
    that the importing thread holds. Each worker's ``always_pong`` thread answers the
    supervisor's pings: read as the worker's progress, it said "progressing". A helper's
    reads are no work: the worker is the suspect. The pool process's read of the call queue
    leads to the feeder that holds its task, so the chain closes: a deadlock through the
    import lock (it read "event loop blocked in a synchronous wait", which no coroutine
    would end)."""
    workdir = tmp_path / "uvicorn"
    ready = workdir / "ready"
    argv = [sys.executable, str(JOB), str(ready), str(_free_port()), "import_pool"]

    def both_building(_target: object) -> bool:
        return ready.exists() and sum(1 for line in ready.read_text().splitlines()
                                      if line.endswith(" building")) == 2

    with running_target(argv, workdir, ready=both_building, timeout=60) as job:
        workers = {int(line.split()[0]) for line in ready.read_text().splitlines()}
        poll(lambda: all(_feeder_at_import_lock(pid) for pid in workers),
             "each worker's feeder thread at the import lock", 30)
        verdict = json.loads(dump_json(job.launcher))["verdict"]
    assert verdict["kind"] == "deadlock", verdict
    assert verdict["suspects"] and set(verdict["suspects"]) <= workers, verdict
    summary = str(verdict["summary"])
    assert "(uvicorn_import_pool.py:" in summary, summary
    assert "waits for the import lock of uvicorn_import_pool.py" in summary, summary
    assert "a module's body waits for a thread that needs that same module" in summary, summary


def _feeder_at_import_lock(pid: int) -> bool:
    pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    out = subprocess.run([pyspy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                         timeout=30).stdout
    return "_ModuleLock.acquire" in out
