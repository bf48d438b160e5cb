"""The rank and world size of ``init_process_group``'s arguments (analyze/evidence/world.py).

GIVEN an ``mp.spawn`` job of 2 ranks whose ``init_process_group`` calls were given
``world_size=3`` (pytorch#8091; tests/fixtures/frameworks/spawn_world_from_config*.json, real
dumps of tests/targets/frameworks/spawn_jobs.py) THEN rank 2 is missing, the world said by
those arguments; without them read (a dump from before they were), not "progressing": rank
0's polls of its own TCPStore, answered by the store's server thread, are no data moving.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.world import SOURCE, init_args, init_store, with_init_args
from hangscope.model import Process, RankInfo, Role, VerdictKind
from hangscope.model.serialize import load
from hangscope.model.waits import LocalsRead, WaitEvidence

FIXTURES = Path(__file__).parent.parent / "fixtures" / "frameworks"


def _frame(name: str, filename: str, **values: str) -> dict[str, object]:
    return {"name": name, "filename": filename,
            "locals": [{"name": k, "repr": v, "arg": True} for k, v in values.items()]}


def _threads(*frames: dict[str, object]) -> list[object]:
    return [{"os_thread_id": 7, "frames": list(frames)}]


_C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def test_the_arguments_of_init_process_group_are_read() -> None:
    threads = _threads(_frame("_new_process_group_helper", _C10D, group_size="3"),
                       _frame("init_process_group", _C10D, rank="1", world_size="3"))
    assert init_args(threads, 7) == (1, 3)


def test_the_defaults_from_the_environment_are_no_world() -> None:
    threads = _threads(_frame("init_process_group", _C10D, rank="-1", world_size="-1"))
    assert init_args(threads, 7) == (None, None)
    assert init_args(_threads(_frame("train", "/job/train.py", world_size="3")), 7) == (
        None, None)  # a frame of the program's own: not the call's arguments


def test_spawn_order_gives_way_to_the_arguments() -> None:
    procs = [Process(pid=10 + i, role=Role.RANK,
                     rank=RankInfo(global_rank=i, source="spawn-order")) for i in range(2)]
    waits = WaitEvidence(locals=(LocalsRead(10, init_rank=1, init_world=3),
                                 LocalsRead(11, init_rank=0, init_world=3)))
    out = with_init_args(procs, waits)
    assert [(p.rank.global_rank, p.rank.world_size, p.rank.source) for p in out] == [
        (1, 3, SOURCE), (0, 3, SOURCE)]


def test_a_spawn_of_fewer_ranks_than_its_world_is_a_missing_rank() -> None:
    verdict = analyze(load(FIXTURES / "spawn_world_from_config.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISSING_RANK, verdict
    assert "expected 3 ranks (world_size=3 passed to init_process_group), found 0-1: rank 2 "\
        "is missing" in verdict.summary, verdict.summary


def test_a_rank_polling_its_own_store_is_not_progressing() -> None:
    snap = analyze(load(FIXTURES / "spawn_world_from_config_nolocals.dump.json"))
    assert snap.verdict is not None and snap.verdict.kind is not VerdictKind.PROGRESSING, (
        snap.verdict)
    assert snap.progress is not None
    assert {r.decision for r in snap.progress.ranks} == {"stuck"}, snap.progress.ranks


def test_the_store_address_of_the_rendezvous_is_read() -> None:
    rendezvous = "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py"
    threads = _threads(_frame("_create_c10d_store", rendezvous, hostname='"127.0.0.1"',
                              port="19131", rank="1"),
                       _frame("init_process_group", _C10D, rank="1", world_size="2"))
    assert init_store(threads, 7) == "127.0.0.1:19131"
    assert init_store(_threads(_frame("init_process_group", _C10D)), 7) is None
