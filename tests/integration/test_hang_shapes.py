"""Verdicts on real jobs of shapes a blind test found misread (tests/targets/hang_shapes.py).

GIVEN 3 ranks started by ``bash -c '... & ... & wait'`` and only one rank's PID, THEN discovery
climbs to the shell and finds all 3 (no rank is "missing"). GIVEN rank 0 holding a build lock
while gcc (and its cc1, which inherits RANK=0) compiles, THEN cc1 is a compiler, not a second
rank 0, and its exit is no critical finding. GIVEN a lock-order inversion between two threads of
rank 1 while ranks 0 and 2 wait in all_reduce, THEN the verdict is a local deadlock in rank 1
naming both threads where they block.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import dump_json, show_text, verdict_job

SHAPES = Path(__file__).resolve().parent.parent / "targets" / "hang_shapes.py"


def _dumped(mode: str, tmp_path: Path, tags: list[str], target: str
            ) -> tuple[dict[str, int], dict, str]:
    """Run a hang_shapes.py job, dump it from the PID of ``target``: (PIDs by tag, JSON, text)."""
    with verdict_job(mode, tmp_path, tags, timeout=120, jobs=SHAPES) as job:
        raw = dump_json(job.pids[target])
    return job.pids, json.loads(raw), show_text(raw, tmp_path)


def _ranks(data: dict) -> dict[int, int]:
    return {p["rank"]["global_rank"]: p["pid"] for p in data["processes"]
            if p["role"] == "rank" and p.get("rank")}


@pytest.mark.extended
def test_given_a_rank_pid_under_a_bash_launcher_then_its_siblings_are_found(
        tmp_path: Path) -> None:
    pids, data, text = _dumped("shell", tmp_path, ["rank0", "rank1", "rank2"], "rank2")
    assert _ranks(data) == {r: pids[f"rank{r}"] for r in range(3)}
    shell = next(p for p in data["processes"] if p["pid"] == data["job"]["launcher"])
    assert shell["cmdline"][:2] == ["bash", "-c"], shell
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [pids["rank1"]]
    assert "missing" not in text.lower(), text


def test_given_a_rank_running_gcc_then_cc1_is_its_compiler_not_a_rank(tmp_path: Path) -> None:
    pids, data, _ = _dumped("gcc", tmp_path, ["holder", "rank1", "rank2"], "rank2")
    assert _ranks(data) == {0: pids["holder"], 1: pids["rank1"], 2: pids["rank2"]}
    ranks = [p for p in data["processes"] if p["role"] == "rank"]
    assert len(ranks) == 3, [(p["pid"], p["cmdline"][:1]) for p in ranks]
    helpers = [p for p in data["processes"] if p["ppid"] != data["job"]["launcher"]
               and p["pid"] != data["job"]["launcher"]]
    assert helpers, "gcc was not running at discovery"
    assert {p["role"] for p in helpers} == {"compiler"}, [(p["cmdline"][:1], p["role"])
                                                          for p in helpers]
    verdict = data["verdict"]
    # (rank 0 builds again and again while it holds the lock: ranks 1-2 wait for work that
    # moves, slowly, or, where the window saw rank 0 only wait for one long gcc, for its lock;
    # either way rank 0 is the one they wait for, never a missing rank)
    assert verdict["kind"] in ("progressing", "compiling", "lock_wait"), verdict
    assert f"rank 0 (PID {pids['holder']})" in verdict["summary"], verdict
    for finding in data["findings"]:
        assert not (finding["severity"] == "critical" and "exited" in finding["message"]), finding


@pytest.mark.extended
def test_given_a_lock_inversion_in_one_rank_then_local_deadlock_not_straggler(
        tmp_path: Path) -> None:
    pids, data, text = _dumped("inversion", tmp_path, ["rank0", "rank1", "rank2"], "rank0")
    verdict = data["verdict"]
    assert verdict["kind"] == "local_deadlock", verdict
    assert verdict["suspects"] == [pids["rank1"]]
    summary = verdict["summary"]
    assert summary.startswith(f"Local deadlock in rank 1 (PID {pids['rank1']}): 2 threads")
    # Each thread where it blocks: its inner (second) acquire.
    source = SHAPES.read_text().splitlines()
    inner_b = source.index("            with lock_b:") + 1
    inner_a = source.index("            with lock_a:") + 1
    assert f"loader at inversion_rank.<locals>.loader (hang_shapes.py:{inner_b})" in summary
    assert f"stats at inversion_rank.<locals>.stats (hang_shapes.py:{inner_a})" in summary
    assert "ranks 0,2 wait in all_reduce at inversion_rank (hang_shapes.py:" in summary
    assert "LOCAL DEADLOCK" in text and "Straggler" not in text


@pytest.mark.extended
def test_given_ranks_without_a_common_parent_then_the_rendezvous_finds_them(
        tmp_path: Path) -> None:
    pids, data, text = _dumped("orphans", tmp_path, ["rank0", "rank1", "rank2"], "rank2")
    parents = {p["pid"]: p["ppid"] for p in data["processes"]}
    assert parents[pids["rank0"]] != parents[pids["rank2"]] or parents[pids["rank2"]] == 1
    assert _ranks(data) == {r: pids[f"rank{r}"] for r in range(3)}
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [pids["rank1"]]
    assert "missing" not in text.lower(), text


@pytest.mark.extended
def test_given_an_exited_rank_and_its_orphaned_fork_then_the_rank_is_missing(
        tmp_path: Path) -> None:
    pids, data, _ = _dumped("zombie_fork", tmp_path, ["rank0", "rank1", "failing2", "helper"],
                            "launcher")
    assert pids["helper"] not in {p["pid"] for p in data["processes"]}  # no second rank 2
    verdict = data["verdict"]
    assert verdict["kind"] == "missing_rank", verdict
    assert verdict["suspects"] == [pids["failing2"]]
    assert "exited with code 1" in verdict["summary"]
