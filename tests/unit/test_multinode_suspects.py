"""Suspects and process rows keyed by (host, PID) on real dumps of the namespace cluster.

tests/fixtures/multinode/gloo3x2-node0N.json: the hung 3-node gloo job (ranks 0-1 on node01,
2-3 on node02, 4-5 on node03; rank 5 in all_gather). Rank 5 is PID 14 on node03, and PID 14
on node02 is rank 3: a suspect named by PID alone would mark rank 3 (and its group) too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import support

from hangscope.analyze import analyze
from hangscope.analyze.merge import merge
from hangscope.model.serialize import dumps, from_dict, load

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "multinode"
NODE_FILES = [str(FIXTURES / f"gloo3x2-node0{n}.json") for n in (1, 2, 3)]
WIDE = {"COLUMNS": "200"}


@pytest.fixture(scope="module")
def merged():
    return merge([load(path) for path in NODE_FILES])


def test_the_suspect_is_rank_5_on_node03_only(merged) -> None:
    verdict = merged.verdict
    assert verdict.suspects == (14,)
    assert verdict.suspect_hosts == ("node03",)
    assert [(p.host, p.rank.global_rank) for p in merged.suspect_processes] == [("node03", 5)]
    rank3 = next(p for p in merged.processes if p.rank and p.rank.global_rank == 3)
    assert rank3.pid == 14 and not verdict.is_suspect(rank3)
    marked = [g.ranks for g in merged.groups if verdict.holds_suspect(g)]
    assert marked == [(5,)]


def _group_lines(text: str) -> list[str]:
    section = text.split("Where the ranks are", 1)[1].split("Processes", 1)[0]
    return [line for line in section.splitlines() if re.match(r"^ranks? \d", line)]


def test_text_report_marks_only_rank_5_and_names_hosts() -> None:
    result = support.run_cli("merge", *NODE_FILES, env=WIDE)
    assert result.returncode == 0, result.stderr
    lines = _group_lines(result.stdout)
    assert [line.split()[1] for line in lines if "← suspect" in line] == ["5"], lines
    assert any(line.startswith("ranks 0-4") and "suspect" not in line for line in lines)
    table = result.stdout.split("\nProcesses\n", 1)[1].splitlines()
    assert table[0].split()[:4] == ["rank", "pid", "host", "role"]
    rows = {(cells[0], cells[1], cells[2]) for cells in map(str.split, table[1:10])}
    assert {("3", "14", "node02"), ("5", "14", "node03"), ("4", "13", "node03")} <= rows
    assert "stack of rank 5 (PID 14 on node03)" in result.stdout
    assert "launcher (PID 11 on node02)" in result.stdout


def test_markdown_report_marks_only_rank_5_and_has_a_host_column() -> None:
    result = support.run_cli("merge", "--format", "md", *NODE_FILES, env=WIDE)
    assert result.returncode == 0, result.stderr
    marked = [line for line in result.stdout.splitlines() if "**suspect**" in line]
    assert marked == ["- **rank 5**: collective `all_gather` at `log_metrics (worker.py:44)` "
                      "⬅ **suspect**"]
    assert "| rank | pid | host | role |" in result.stdout
    assert "| 5 | 14 | node03 | rank |" in result.stdout
    assert "| 3 | 14 | node02 | rank |" in result.stdout


def test_the_merged_json_keeps_hosts_and_show_reads_it(merged, tmp_path) -> None:
    data = json.loads(dumps(merged))
    assert data["verdict"]["suspect_hosts"] == ["node03"]
    assert all(len(g["hosts"]) == len(g["pids"]) for g in data["groups"])
    again = from_dict(data)
    assert again.verdict.suspect_hosts == ("node03",)
    path = tmp_path / "merged.json"
    path.write_text(dumps(merged))
    result = support.run_cli("show", str(path), env=WIDE)
    assert result.returncode == 0, result.stderr
    lines = _group_lines(result.stdout)
    assert [line.split()[1] for line in lines if "← suspect" in line] == ["5"], lines


def test_an_older_merged_dump_without_hosts_still_shows() -> None:
    """slurm3x2-merged.json was written before suspect_hosts: its suspect PID (28, rank 5 on
    node03, also rank 3's PID on node02) matches on any host, as it did."""
    path = FIXTURES / "slurm3x2-merged.json"
    raw = json.loads(path.read_text())
    assert "suspect_hosts" not in raw["verdict"]
    snap = load(path)
    assert snap.verdict.suspect_keys == frozenset({(None, 28)})
    assert {(p.host, p.pid) for p in snap.suspect_processes} == {("node02", 28), ("node03", 28)}
    result = support.run_cli("show", str(path), env=WIDE)
    assert result.returncode == 0, result.stderr
    assert "Rank 5 on node03 is in all_gather" in result.stdout


def test_one_node_report_has_no_host_column() -> None:
    result = support.run_cli("show", NODE_FILES[0], env=WIDE)
    assert result.returncode == 0, result.stderr
    header = result.stdout.split("\nProcesses\n", 1)[1].splitlines()[0]
    assert header.split()[:3] == ["rank", "pid", "role"]
    md = support.run_cli("show", "--format", "md", NODE_FILES[0], env=WIDE)
    assert "| rank | pid | role |" in md.stdout and "host |" not in md.stdout


def test_the_4_node_dump_marks_rank_7_only() -> None:
    """gloo4x2-merged.json: `hangscope dump 15 --nodes 'node[01-04]'` on the namespace cluster
    (rank 7 = PID 14 on node04 in all_gather; PID 14 is also rank 3's and rank 5's)."""
    path = FIXTURES / "gloo4x2-merged.json"
    again = analyze(load(path))  # the analysis of today, not only what the file says
    assert list(zip(again.verdict.suspect_hosts, again.verdict.suspects,
                    strict=True)) == [("node04", 14)]
    assert sorted(p.host for p in again.processes if p.pid == 14) == [
        "node02", "node03", "node04"]
    result = support.run_cli("show", str(path), env=WIDE)
    assert result.returncode == 0, result.stderr
    lines = _group_lines(result.stdout)
    assert [line.split()[1] for line in lines if "← suspect" in line] == ["7"], lines
    assert "stack of rank 7 (PID 14 on node04)" in result.stdout
