"""`hangscope merge` and `hangscope show` on real recorded dumps (tests/fixtures/snapshots).

GIVEN a real dump of the mismatch demo split into two "nodes" WHEN merged THEN the merged
diagnosis is the one of the whole job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import support

from hangscope.analyze.merge import merge
from hangscope.model.serialize import dumps, from_dict, load

SNAPSHOTS = support.SNAPSHOTS


def split_by_rank(doc: dict[str, Any], keep: set[int], host: str) -> dict[str, Any]:
    part = json.loads(json.dumps(doc))
    part["processes"] = [
        p for p in part["processes"]
        if p["role"] == "rank" and p["rank"]["global_rank"] in keep
    ]
    for proc in part["processes"]:
        proc["host"] = host
    part["hosts"] = [dict(part["hosts"][0], name=host)]
    part["job"]["expected_ranks"] = len(keep)
    return part


def test_given_two_node_dumps_when_merged_then_mismatch_names_rank_3() -> None:
    doc = json.loads((SNAPSHOTS / "mismatch.json").read_text())
    node_a = from_dict(split_by_rank(doc, {0, 1}, "node-a"))
    node_b = from_dict(split_by_rank(doc, {2, 3}, "node-b"))
    merged = merge([node_a, node_b])
    assert merged.verdict is not None
    assert merged.verdict.kind.value == "mismatched_collectives"
    rank3 = next(p.pid for p in merged.processes if p.rank and p.rank.global_rank == 3)
    assert merged.verdict.suspects == (rank3,)
    assert merged.job.expected_ranks == 4
    assert [h.name for h in merged.hosts] == ["node-a", "node-b"]


def test_merge_cli_reads_files_and_prints_the_verdict(tmp_path: Path, hangscope_cli: Any) -> None:
    doc = json.loads((SNAPSHOTS / "mismatch.json").read_text())
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(split_by_rank(doc, {0, 1, 2}, "node-a")))
    b.write_text(json.dumps(split_by_rank(doc, {3}, "node-b")))
    result = hangscope_cli("merge", str(a), str(b), "--format", "md")
    assert result.returncode == 0, result.stderr
    assert "Verdict: mismatched collectives" in result.stdout
    assert "rank 3 waits in `all_gather`" in result.stdout  # a code span (issue 20 item 11)


def test_saved_dump_round_trips_through_json() -> None:
    for path in sorted(SNAPSHOTS.glob("*.json")):
        snap = load(path)
        assert from_dict(json.loads(dumps(snap))) == snap, path.name
