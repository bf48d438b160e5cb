"""``torch.multiprocessing.spawn`` ranks given their rank and world size as arguments
(tests/targets/frameworks/spawn_jobs.py; blind round 31's 06).

GIVEN ``nprocs=2`` spawned for a config's ``world_size=3`` (pytorch#8091): rank 0's TCPStore
waiting for its third worker, rank 1 in the group's rendezvous THEN a missing rank 2, the
world size read from ``init_process_group``'s arguments (no environment says it) and the
ranks numbered by theirs (it read "progressing": rank 0 polling its own store, whose server
thread's answers counted as data moving). GIVEN a world that matches THEN progressing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TARGETS, asleep, dump_json, poll, show_text, verdict_job

pytestmark = pytest.mark.frameworks

JOBS = TARGETS / "frameworks" / "spawn_jobs.py"


def test_a_spawn_of_fewer_ranks_than_the_world_is_a_missing_rank(tmp_path: Path) -> None:
    with verdict_job("world_from_config", tmp_path, ["launcher", "rank0", "rank1"],
                     timeout=120, jobs=JOBS) as job:
        ranks = [job.pids["rank0"], job.pids["rank1"]]
        # rank 1 blocks in the rendezvous once it has joined the store (rank 0 polls for ever)
        poll(lambda: asleep(ranks[1]), "rank 1 in the rendezvous", 60)
        raw = dump_json(job.pids["launcher"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "missing_rank", (verdict, text)
    assert verdict["summary"].startswith(
        "Missing rank: expected 3 ranks (world_size=3 passed to init_process_group), found "
        "0-1: rank 2 is missing"), verdict["summary"]
    numbered = {p["pid"]: p["rank"]["global_rank"] for p in data["processes"] if p["rank"]}
    assert numbered == {ranks[0]: 0, ranks[1]: 1}, numbered


def test_a_spawn_of_the_whole_world_is_progressing(tmp_path: Path) -> None:
    with verdict_job("world_matches", tmp_path, ["launcher", "rank0", "rank1"], timeout=120,
                     jobs=JOBS) as job:
        raw = dump_json(job.pids["launcher"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    assert data["verdict"]["kind"] == "progressing", (data["verdict"], text)


def test_ranks_given_different_store_ports_are_a_split_rendezvous(tmp_path: Path) -> None:
    """Each rank sets its own MASTER_PORT (blind round 32's 05, on Lightning: every process
    picks its own free port): rank 0 hosts the store, rank 1 retries a port nobody serves.
    The addresses come from ``_create_c10d_store``'s arguments (it read "All waiting ...
    check MASTER_ADDR/MASTER_PORT", nobody blamed)."""
    with verdict_job("port_per_rank", tmp_path, ["launcher", "rank0", "rank1"], timeout=120,
                     jobs=JOBS) as job:
        ranks = [job.pids["rank0"], job.pids["rank1"]]
        poll(lambda: all(asleep(r) for r in ranks), "both ranks in the rendezvous", 60)
        raw = dump_json(job.pids["launcher"])
    data, text = json.loads(raw), show_text(raw, tmp_path)
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", (verdict, text)
    summary = verdict["summary"]
    assert summary.startswith("Split rendezvous: the ranks look for the job's TCPStore at "
                              "different addresses: rank 0 waits at 127.0.0.1:"), summary
    assert ", the store rank 0 hosts; rank 1 waits at 127.0.0.1:" in summary, summary
    assert summary.count("where no process of the job listens") == 1, summary
    assert verdict["suspects"] == [ranks[1]], verdict
