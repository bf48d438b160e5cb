"""A Ray driver waiting for tasks that no worker runs: blind round 16's 05, recorded
(tests/fixtures/frameworks/ray_pending_tasks.dump.json, Ray 2.60; ray#2541, ray#15594).

``ray.init(num_cpus=2)``, two ``Predictor`` actors of one CPU each, then ``ray.get`` on eight
``featurize`` tasks: the actors hold both CPUs, so the tasks stay pending. First run: the
driver's probable edges went to the actors (which run no plain task) and each actor's
``PythonGCThread`` (Ray's own collection trigger) ended the chain as its suspect.
"""

from __future__ import annotations

import json
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import from_dict, load

DUMP = (Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"
        / "ray_pending_tasks.dump.json")


def test_a_driver_waiting_for_tasks_no_worker_runs_is_the_suspect_and_the_actors_are_why(
        ) -> None:
    snap = analyze(load(DUMP))
    verdict = snap.verdict
    driver = next(p.pid for p in snap.processes if "batch_infer.py" in (p.title or ""))
    actors = sorted(p.pid for p in snap.processes if p.title == "ray::Predictor")
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (driver,), verdict
    assert verdict.summary.startswith("Tasks nobody runs: "), verdict.summary
    assert ("every worker hosts an actor and runs its methods only (PID "
            f"{actors[0]} (ray actor Predictor), PID {actors[1]} (ray actor Predictor))"
            ) in verdict.summary, verdict.summary
    assert "each actor holds its own for as long as it lives" in verdict.summary


def test_rays_garbage_collection_trigger_is_a_helper_thread() -> None:
    snap = analyze(load(DUMP))
    gc = [t for p in snap.processes for t in p.threads if t.name == "PythonGCThread"]
    assert gc and all(t.helper for t in gc)


TRAIN = DUMP.parent / "ray_train_task_starved.dump.json"


def _like(frame: dict, name: str, at: str, line: int | None = None) -> dict:
    """``frame`` (a real one of the dump) as the frame ``name`` of the file ``at`` ends in:
    Ray's native ones keep their module (_raylet.so), Python ones are read at ``line``."""
    native = line is None
    return {**frame, "name": name, "native": native, "line": line,
            "file": frame["file"] if native else frame["file"].rsplit("/ray/", 1)[0] + at,
            "module": frame["module"] if native else None}


def test_a_train_worker_waiting_for_a_task_is_the_suspect_whoever_polls_beside_it() -> None:
    """Ray Train's task_starved job (tests/frameworks/test_ray_train.py), recorded, with its
    controller caught inside its health poll as the CI machine caught it under load: the
    TrainController's loop thread in ``ray.wait(polls, timeout=...)`` from
    ``WorkerGroup.poll_status`` (the native frames of rank 0's own get, Ray's wait blocks the
    same way). Rank 0's get, which its own line makes with no timeout, is the wait the job
    hangs on, not the controller's poll (it named the controller)."""
    data = json.loads(TRAIN.read_text())
    rank0 = next(p for p in data["processes"] if p["rank"] and p["rank"]["global_rank"] == 0)
    get = next(t for t in rank0["threads"] if t["tid"] == rank0["working_tid"])["frames"]
    controller = next(p for p in data["processes"] if p["title"] == "ray::TrainController.run")
    loop = next(t for t in controller["threads"] if t["name"].startswith("AsyncIO Thread"))
    python = get[9]
    train = "/ray/train/v2/_internal/execution/"
    loop["frames"] = [
        *get[:2],  # the futex, pthread_cond_timedwait
        _like(get[2], "ray::core::GetRequest::Wait", "_raylet.so"),
        _like(get[3], "ray::core::CoreWorkerMemoryStore::Wait", "_raylet.so"),
        _like(get[6], "ray::core::CoreWorker::Wait", "_raylet.so"),
        _like(get[8], "wait", "_raylet.so"),
        _like(python, "wait", "/ray/_private/worker.py", 3166),
        _like(python, "WorkerGroup.poll_status", train + "worker_group/worker_group.py", 763),
        _like(python, "TrainController._poll_workers", train + "controller/controller.py", 436),
        _like(python, "TrainController._step", train + "controller/controller.py", 641),
        _like(python, "Handle._run", "/asyncio/events.py", 84),
        *loop["frames"][4:]]  # BaseEventLoop._run_once, run_forever, the thread's own
    loop["wchan"] = "futex_do_wait"
    snap = analyze(from_dict(data))
    waiting = next(p for p in snap.processes if p.pid == controller["pid"])
    assert waiting.working_tid == loop["tid"]  # the controller waits in its poll
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (rank0["pid"],), verdict
    assert verdict.summary.startswith("Tasks nobody runs: Thread TrainingThread"), \
        verdict.summary
