"""A Ray driver in ``ray.init`` while the workers its raylet started compute in their start-up,
on a real recorded dump (tests/fixtures/frameworks/ray_workers_starting.dump.json:
tests/targets/frameworks/ray_start_up.py ``site_slow``, Ray 2.60).

The driver's ``connect`` waits on the raylet over its Unix socket; the raylet's event loop idles
while the two workers it started run a site hook before Ray retitles them (``python
.../default_worker.py --raylet-name=...``); Ray's agents read their stdin pipe from the raylet
on a pool thread (a parent-death watch). GIVEN the workers' window THEN progressing: the driver
waits for them through the raylet. GIVEN the workers unwatched (as when they read as the
raylet) THEN not progressing. The agents' stdin watch is no prompt in either.

And a Ray Data pipeline (tests/fixtures/frameworks/raydata_actor_starting.dump.json: the
``actor_pool`` twin of tests/targets/frameworks/ray_data_jobs.py, caught under load) whose next
map actor's worker the raylet started just after discovery listed the job: GIVEN that worker
born during the dump and computing THEN starting up, not hung; GIVEN it not yet run THEN not.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.progress import Newcomer
from hangscope.model.serialize import load

DUMP = (Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"
        / "ray_workers_starting.dump.json")


@cache
def _recorded() -> Snapshot:
    return load(DUMP)


def _starting(snap: Snapshot) -> set[int]:
    return {p.pid for p in snap.processes
            if len(p.cmdline) > 1 and p.cmdline[1].endswith("workers/default_worker.py")}


def test_a_driver_waiting_on_the_raylet_whose_workers_start_up_progresses() -> None:
    recorded = _recorded()
    workers = _starting(recorded)
    assert len(workers) == 2
    verdict = analyze(recorded).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == ()
    assert any(f"PID {pid}" in verdict.summary for pid in workers), verdict.summary
    assert "through the helper" in verdict.summary, verdict.summary


def test_the_same_dump_with_the_workers_unwatched_is_not_progressing() -> None:
    recorded = _recorded()
    workers = _starting(recorded)
    readings = tuple(dataclasses.replace(r, progress=dataclasses.replace(
        r.progress, processes=tuple(p for p in r.progress.processes if p.pid not in workers)))
        if r.progress is not None else r for r in recorded.readings)
    verdict = analyze(dataclasses.replace(recorded, readings=readings, progress=None)).verdict
    assert verdict is not None and verdict.kind is not VerdictKind.PROGRESSING, verdict


def test_an_agents_stdin_read_on_a_pool_thread_is_no_prompt() -> None:
    """Ray's agents read the raylet's pipe on their stdin in a pool thread until it closes
    (process_watcher._check_parent_via_pipe), their event loop on the main thread: a watch
    for their parent's death, not a question. It read "A prompt nobody answers"."""
    verdict = analyze(_recorded()).verdict
    assert verdict is not None
    assert "prompt" not in verdict.summary, verdict.summary


PIPELINE = (Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"
            / "raydata_actor_starting.dump.json")


def _with_newcomer(snap: Snapshot, cpu_s: float) -> Snapshot:
    """The dump with the worker its raylet's log says it started 0.2 s into it (PID 6778, a
    ``default_worker.py`` born after discovery listed the job: ``Started worker process with
    pid 6778`` at 00:11:38.535), as the window's end reads it."""
    raylet = next(p.pid for p in snap.processes if "raylet/raylet" in (p.title or ""))
    born = Newcomer(pid=6778, ppid=raylet, title=(
        "/venv/bin/python /venv/lib/python3.11/site-packages/ray/_private/workers/"
        "default_worker.py --raylet-name=/tmp/ray/session_1/sockets/raylet"), born_s=0.2,
        cpu_s=cpu_s, state="R")
    readings = tuple(dataclasses.replace(r, progress=dataclasses.replace(
        r.progress, newcomers=(born,))) if r.progress is not None else r
        for r in snap.readings)
    return dataclasses.replace(snap, readings=readings, progress=None)


def test_a_pipeline_waiting_while_its_next_actors_worker_starts_is_starting_up() -> None:
    """Ray Data's pool replaces its map actor for each run of the pipeline; the dump listed
    the job as the old one was killed and before the raylet started the next one's worker
    (CI, 2026-12-07: "Tasks nobody runs", or the idle location tracker "waits on a lock")."""
    recorded = load(PIPELINE)
    before = analyze(recorded).verdict
    assert before is not None and before.kind is not VerdictKind.PROGRESSING, before
    verdict = analyze(_with_newcomer(recorded, cpu_s=0.6)).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.summary.startswith("Starting up, not hung: the main process (PID "), \
        verdict.summary
    assert "PID 6778 (default_worker.py)" in verdict.summary, verdict.summary
    assert verdict.suspects == ()


def test_a_worker_born_during_the_dump_that_never_ran_is_no_start_up() -> None:
    """Forked and not yet computing (no CPU since its birth): nothing says work is set up."""
    verdict = analyze(_with_newcomer(load(PIPELINE), cpu_s=0.0)).verdict
    assert verdict is not None and verdict.kind is not VerdictKind.PROGRESSING, verdict
