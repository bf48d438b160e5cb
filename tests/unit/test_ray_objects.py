"""Ray's ``ray.get`` across actors on a real recorded dump (tests/fixtures/frameworks/
ray_cycle.dump.json: tests/targets/frameworks/ray_jobs.py ``cycle``, Ray 2.60, ray#3307).

GIVEN two actors each in ``ray.get`` on the other's result (the ObjectIDs read from their
memory, the actors' PIDs from their core-worker logs) THEN a deadlock between the two actors'
processes, the driver a victim. GIVEN the same dump without the logs' word on who hosts which
actor THEN no edge and no suspect made up. And an ObjectID names the actor whose task returns
it, and none for a plain task's.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.frameworks.ray import actor_of_object
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.serialize import load

DUMP = Path(__file__).resolve().parent.parent / "fixtures" / "frameworks" / "ray_cycle.dump.json"


@cache
def _recorded() -> Snapshot:
    return load(DUMP)


def _actors(snap: Snapshot) -> dict[str, int]:
    return {p.title.split(".")[0].removeprefix("ray::"): p.pid for p in snap.processes
            if (p.title or "").startswith(("ray::Planner", "ray::Executor"))}


def test_given_two_actors_in_ray_get_on_each_other_then_a_deadlock_between_them() -> None:
    snap = analyze(_recorded())
    actors = _actors(snap)
    assert set(actors) == {"Planner", "Executor"}
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert verdict.suspects and set(verdict.suspects) <= set(actors.values()), verdict
    edges = {(e.pid, e.to_pid) for e in snap.wait_graph.edges if e.kind == "object"}
    driver = next(p.pid for p in snap.processes if p.role.value == "main")
    assert edges == {(actors["Planner"], actors["Executor"]),
                     (actors["Executor"], actors["Planner"]), (driver, actors["Planner"])}


def test_given_no_word_on_which_process_hosts_an_actor_then_no_edge_and_no_suspect() -> None:
    recorded = _recorded()
    assert recorded.waits is not None and recorded.waits.hosted
    snap = analyze(dataclasses.replace(
        recorded, waits=dataclasses.replace(recorded.waits, hosted=())))
    assert not [e for e in snap.wait_graph.edges if e.kind == "object"]
    assert snap.verdict is not None and snap.verdict.kind is not VerdictKind.DEADLOCK
    assert not set(snap.verdict.suspects) & set(_actors(snap).values()), snap.verdict


def test_an_object_id_names_the_actor_whose_task_returns_it() -> None:
    actor = bytes.fromhex("7ed8dfaf0018afeefe0095e601000000")
    assert actor_of_object(bytes(8) + actor + (1).to_bytes(4, "little")) == actor.hex()
    plain = b"\x11" * 8 + b"\xff" * 12 + bytes.fromhex("01000000") + (1).to_bytes(4, "little")
    assert actor_of_object(plain) is None  # a plain task: any worker may run it
    assert actor_of_object(actor) is None  # not 28 bytes: no ObjectID
