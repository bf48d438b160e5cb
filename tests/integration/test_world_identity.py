"""Missing ranks and rank identity on real jobs (issue 11, items 3 and 5).

GIVEN a WORLD_SIZE=4 gloo job whose rank 3 exited and was reaped by its launcher while ranks
0-2 wait for it in the rendezvous, WHEN hangscope dumps it, THEN the expected world says rank 3 is
missing. GIVEN four processes titled as SGLang DP x TP schedulers (setproctitle), THEN each is
named by its coordinates, and no two share a label or a key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import dump_json, show_text, verdict_job

from hangscope.analyze.evidence.identity import (
    comparable_groups,
    duplicate_labels,
    rank_key,
    rank_label,
)
from hangscope.analyze.evidence.world import describe_missing, missing_ranks
from hangscope.model.serialize import from_dict


@pytest.mark.extended
def test_given_reaped_rank_then_expected_world_names_it_missing(tmp_path: Path) -> None:
    with verdict_job("missing", tmp_path, ["leaving3", "rank0", "rank1", "rank2"],
                     timeout=120) as job:
        data = dump_json(job.launcher)
        snap = from_dict(json.loads(data))
    assert job.pids["leaving3"] not in {p.pid for p in snap.processes}  # reaped: no trace
    for proc in snap.ranks:  # waiting for the rank that never joins
        assert proc.working_thread is not None
        assert proc.working_thread.category.value == "comm_init", proc.working_thread
    missing = missing_ranks(snap.processes, snap.job)
    assert missing is not None
    assert missing.missing == ("3",) and missing.found == ("0-2",)
    assert describe_missing(missing) == (
        "expected 4 ranks (WORLD_SIZE=4), found 0-2: rank 3 is missing (no process is left "
        "of it: it exited and was reaped, or never started)")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "missing_rank", verdict
    assert verdict.summary.startswith(f"Missing rank: {describe_missing(missing)}; ranks 0-2 "
                                      "wait in communicator init"), verdict.summary
    assert "rank 3 is missing" in show_text(data, tmp_path)


@pytest.mark.extended
def test_given_unreaped_rank_then_missing_with_its_exit_code(tmp_path: Path) -> None:
    with verdict_job("missing_unreaped", tmp_path, ["leaving3", "rank0", "rank1", "rank2"],
                     timeout=120) as job:
        data = dump_json(job.launcher)
        snap = from_dict(json.loads(data))
    zombie = snap.process(job.pids["leaving3"])
    assert zombie is not None and zombie.state == "Z"
    missing = missing_ranks(snap.processes, snap.job)
    assert missing is not None and missing.missing == ("3",)
    assert missing.exited == ((zombie.pid, 3),)
    assert describe_missing(missing).endswith(
        f": rank 3 is missing (PID {zombie.pid} exited with code 3, not reaped yet)")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "missing_rank", verdict
    assert f"rank 3 is missing (PID {zombie.pid} exited with code 3, not reaped yet)" in (
        verdict.summary)
    assert verdict.summary.count(f"PID {zombie.pid}") == 1, verdict.summary  # said once
    assert verdict.suspects == (zombie.pid,)
    assert "exited with code 3" in show_text(data, tmp_path)


def test_given_dp_tp_titled_schedulers_then_named_by_coordinates(tmp_path: Path) -> None:
    with verdict_job("dp_tp", tmp_path, [f"rank{i}" for i in range(4)]) as job:
        raw = dump_json(job.launcher)
        data = json.loads(raw)
    snap = from_dict(data)
    ranks = {p.pid: p for p in snap.ranks}
    assert len(ranks) == 4
    # The JSON carries each scheduler's coordinates, read from its title.
    coords = {(p["rank"]["dp"], p["rank"]["tp"]) for p in data["processes"]
              if p["role"] == "rank"}
    assert coords == {(0, 0), (0, 1), (1, 0), (1, 1)}
    # Each title overwrote its environ; RANK comes from the live one (collect/liveenv.py), and
    # a label with coordinates carries it.
    labels = {rank_label(ranks[job.pids[f"rank{i}"]]) for i in range(4)}
    assert labels == {"DP0·TP0 (rank 0)", "DP0·TP1 (rank 1)", "DP1·TP0 (rank 2)",
                      "DP1·TP1 (rank 3)"}
    assert duplicate_labels(list(ranks.values())) == {}
    assert len({rank_key(p) for p in ranks.values()}) == 4
    groups = comparable_groups(list(ranks.values()))
    assert sorted(sorted(rank_label(p) for p in g) for g in groups) == [
        ["DP0·TP0 (rank 0)", "DP0·TP1 (rank 1)"], ["DP1·TP0 (rank 2)", "DP1·TP1 (rank 3)"]]
    # What the user sees: groups and the verdict name each scheduler by its coordinates.
    (group,) = data["groups"]
    assert group["labels"] == ["DP0·TP0 (rank 0)", "DP0·TP1 (rank 1)", "DP1·TP0 (rank 2)",
                               "DP1·TP1 (rank 3)"]
    assert data["verdict"]["summary"].startswith(
        "All waiting: DP0·TP0 (rank 0), DP0·TP1 (rank 1), DP1·TP0 (rank 2), DP1·TP1 (rank 3)"
        " wait "), (
        data["verdict"]["summary"])
    # Alike ranks are one evidence line (issue 20 item 12): it names DP1·TP1 and its PID.
    assert any(line.startswith(("DP1·TP1 (PID ", "ranks DP0·TP0, ")) and "DP1·TP1" in line
               and str(job.pids["rank3"]) in line
               for line in data["verdict"]["evidence"]), data["verdict"]["evidence"]
    report = show_text(raw, tmp_path)
    assert "DP1·TP1" in report, report


@pytest.mark.extended
def test_given_dp_replicas_with_a_mismatch_in_one_then_the_dump_names_it_by_label(
        tmp_path: Path) -> None:
    with verdict_job("dp_tp_mismatch", tmp_path, [f"rank{i}" for i in range(6)],
                     timeout=120) as job:
        raw = dump_json(job.launcher)
    verdict = json.loads(raw)["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    # Titled ranks keep their global rank (the live environ): the labels say both.
    assert verdict["summary"].startswith(
        "Mismatched collectives (in DP1): DP1·TP0 (rank 3), DP1·TP1 (rank 4) wait in all_reduce"
    ), verdict["summary"]
    assert verdict["summary"].endswith("The odd one out is DP1·TP2 (rank 5)."), verdict["summary"]
    assert verdict["suspects"] == [job.pids["rank5"]]
    report = show_text(raw, tmp_path)
    assert "The odd one out is DP1·TP2 (rank 5)" in report, report
