"""`hangscope dump` against real hung jobs: the demos, started for real, diagnosed by the CLI.

GIVEN a demo that has reached its hang (ready-file handshake) WHEN `hangscope dump PID` runs
THEN the JSON verdict, groups and roles are what a user needs to see.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

DUMP_ARGS = ("--samples", "2", "--window", "0.6")


def dump_json(hangscope_cli: Any, pid: int, *extra: str) -> dict[str, Any]:
    result = hangscope_cli("dump", str(pid), "--format", "json", *DUMP_ARGS, *extra, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def by_rank(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    out = {}
    for proc in doc["processes"]:
        if proc["role"] == "rank":
            rank = proc["rank"]
            key = next(v for v in (rank["global_rank"], rank["tp"], rank["local_rank"])
                       if v is not None)
            out[key] = proc
    return out


def working(proc: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in proc["threads"] if t["tid"] == proc["working_tid"])


@pytest.mark.extended
def test_mismatch_demo_names_the_odd_rank_from_launcher_or_rank_pid(
        shared_demo: Any, hangscope_cli: Any) -> None:
    job = shared_demo("mismatch")
    from_launcher = dump_json(hangscope_cli, job.pid)
    from_rank = dump_json(hangscope_cli, job.pid_of("rank1"))
    for doc in (from_launcher, from_rank):
        assert doc["schema"] == "hangscope.dump/1"
        assert doc["job"]["launcher"] == job.pid
        ranks = by_rank(doc)
        assert sorted(ranks) == [0, 1, 2, 3]
        verdict = doc["verdict"]
        assert verdict["kind"] == "mismatched_collectives"
        assert verdict["suspects"] == [job.pid_of("rank3")]
        assert "rank 3 waits in all_gather at gather_metrics (mismatch.py:" in verdict["summary"]
        assert "ranks 0-2 wait in all_reduce at sync_gradients (mismatch.py:" in verdict["summary"]
        groups = {tuple(g["ranks"]): g for g in doc["groups"]}
        assert groups[(0, 1, 2)]["op"] == "all_reduce"
        assert groups[(3,)]["op"] == "all_gather"
        assert working(ranks[3])["category"] == "collective"
        launcher = next(p for p in doc["processes"] if p["pid"] == job.pid)
        assert launcher["role"] == "launcher"
    # The same job, whichever PID the user gave.
    assert {p["pid"] for p in from_launcher["processes"]} == {
        p["pid"] for p in from_rank["processes"]}


@pytest.mark.extended
def test_mismatch_demo_markdown_and_file_output(shared_demo: Any, hangscope_cli: Any,
                                                 tmp_path: Path) -> None:
    job = shared_demo("mismatch")
    out = tmp_path / "report.md"
    result = hangscope_cli("dump", str(job.pid), "--format", "md", "-o", str(out), *DUMP_ARGS,
                           timeout=90)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert "Verdict: mismatched collectives" in text
    assert "<details>" in text and "all_gather" in text
    saved = tmp_path / "dump.json"
    assert hangscope_cli("dump", str(job.pid), "--format", "json", "-o", str(saved),
                         *DUMP_ARGS, timeout=90).returncode == 0
    shown = hangscope_cli("show", str(saved))
    assert shown.returncode == 0, shown.stderr
    assert "MISMATCHED COLLECTIVES" in shown.stdout
    assert "all_gather" in shown.stdout


@pytest.mark.extended
def test_sglang_demo_names_schedulers_detokenizer_and_waiting_launcher(
        shared_demo: Any, hangscope_cli: Any) -> None:
    job = shared_demo("sglang")
    doc = dump_json(hangscope_cli, job.pid)
    assert doc["job"]["kind"] == "sglang"
    assert doc["job"]["expected_ranks"] == 4
    ranks = by_rank(doc)
    assert sorted(ranks) == [0, 1, 2, 3]
    for tp, proc in ranks.items():
        assert proc["title"] == f"sglang::scheduler_TP{tp}"
        assert proc["rank"]["tp"] == tp
    roles = {p["role"] for p in doc["processes"]}
    assert {"launcher", "detokenizer"} <= roles
    verdict = doc["verdict"]
    assert verdict["kind"] == "mismatched_collectives"
    assert verdict["suspects"] == [ranks[3]["pid"]]
    launcher = next(p for p in doc["processes"] if p["role"] == "launcher")
    assert working(launcher)["category"] == "ipc_wait"
    assert any(line.startswith(f"launcher (PID {job.pid}) waits on another process")
               for line in verdict["evidence"])
    findings = {f["id"]: f for f in doc["findings"]}
    assert "listen.missing" in findings
    assert "30000" in findings["listen.missing"]["message"]
    assert "activity.idle" in findings


def test_deadlock_demo_names_both_threads_and_acquire_sites(
        shared_demo: Any, hangscope_cli: Any) -> None:
    job = shared_demo("deadlock")
    doc = dump_json(hangscope_cli, job.pid)
    verdict = doc["verdict"]
    assert verdict["kind"] == "local_deadlock"
    assert verdict["suspects"] == [job.pid]
    assert "loader at load_shard (deadlock.py:" in verdict["summary"]
    assert "writer at flush_cache (deadlock.py:" in verdict["summary"]
    text = hangscope_cli("dump", str(job.pid), *DUMP_ARGS, timeout=90)
    assert text.returncode == 0
    assert "LOCAL DEADLOCK" in text.stdout
    assert "thread loader" in text.stdout and "thread writer" in text.stdout


@pytest.mark.extended
def test_straggler_demo_names_the_spinning_rank_and_its_function(
        shared_demo: Any, hangscope_cli: Any) -> None:
    job = shared_demo("straggler")
    doc = dump_json(hangscope_cli, job.pid)
    verdict = doc["verdict"]
    assert verdict["kind"] == "straggler"
    assert verdict["suspects"] == [job.pid_of("rank3")]
    assert "rank 3 runs on CPU at preprocess_batch (straggler.py:" in verdict["summary"]
    assert "ranks 0-2 wait in all_reduce" in verdict["summary"]


@pytest.mark.extended
def test_torchrun_job_ranks_come_from_the_environment(shared_demo: Any, hangscope_cli: Any) -> None:
    job = shared_demo("torchrun")
    doc = dump_json(hangscope_cli, job.pid_of("rank0"))
    assert doc["job"]["kind"] == "torchrun"
    ranks = by_rank(doc)
    assert sorted(ranks) == [0, 1, 2, 3]
    assert all(p["rank"]["source"] == "env" for p in ranks.values())
    assert all(p["rank"]["world_size"] == 4 for p in ranks.values())
    assert doc["job"]["expected_ranks"] == 4
    assert doc["verdict"]["kind"] == "mismatched_collectives"
    assert doc["verdict"]["suspects"] == [job.pid_of("rank3")]


@pytest.mark.parametrize(
    ("pid", "code", "words"),
    [
        ("0", 2, "not a process ID"),
        ("-5", 2, "not a process ID"),
        ("abc", 2, "not a process ID"),
        ("99999999", 2, "larger than any process ID"),
        ("4194000", 3, "No process with PID 4194000"),
    ],
)
def test_bad_pid_is_one_sentence_and_an_exit_code(hangscope_cli: Any, pid: str, code: int,
                                                  words: str) -> None:
    result = hangscope_cli("dump", pid)
    assert result.returncode == code
    assert words in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
