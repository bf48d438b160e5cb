"""A Ray driver waiting for tasks that no worker runs: blind round 16's 05, recorded
(tests/fixtures/frameworks/ray_pending_tasks.dump.json, Ray 2.60; ray#2541, ray#15594).

``ray.init(num_cpus=2)``, two ``Predictor`` actors of one CPU each, then ``ray.get`` on eight
``featurize`` tasks: the actors hold both CPUs, so the tasks stay pending. First run: the
driver's probable edges went to the actors (which run no plain task) and each actor's
``PythonGCThread`` (Ray's own collection trigger) ended the chain as its suspect.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

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
