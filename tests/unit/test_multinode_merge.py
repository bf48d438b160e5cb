"""merge of real per-node dumps of the namespace cluster's hung 3-node gloo job
(tests/fixtures/multinode/gloo3x2-node0N.json: ranks 0-1 on node01, 2-3 on node02, 4-5 on
node03, rank 5 in all_gather). PIDs repeat across nodes (13 and 14 on node02 and node03), so
these dumps show whether anything is keyed by PID alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangscope.analyze.merge import merge
from hangscope.model import Role, VerdictKind
from hangscope.model.serialize import from_dict, load

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "multinode"
NODES = ("node01", "node02", "node03")


@pytest.fixture(scope="module")
def snapshots():
    return [load(FIXTURES / f"gloo3x2-{n}.json") for n in NODES]


def _ranks_by_host(snap):
    out: dict[str, set[int]] = {}
    for p in snap.processes:
        if p.role == Role.RANK:
            out.setdefault(p.host, set()).add(p.rank.global_rank)
    return out


def test_given_colliding_pids_when_merged_then_every_rank_keeps_its_node(snapshots) -> None:
    pids = [{p.pid for p in s.processes if p.role == Role.RANK} for s in snapshots]
    assert pids[1] & pids[2], "the fixture must have PIDs that repeat across nodes"

    merged = merge(snapshots)

    assert _ranks_by_host(merged) == {"node01": {0, 1}, "node02": {2, 3}, "node03": {4, 5}}
    keys = [(p.host, p.pid) for p in merged.processes]
    assert len(keys) == len(set(keys)) == sum(len(s.processes) for s in snapshots)


def test_the_verdict_names_the_odd_rank_and_its_node(snapshots) -> None:
    merged = merge(snapshots)
    assert merged.verdict.kind == VerdictKind.MISMATCHED_COLLECTIVES
    assert merged.verdict.summary.startswith(
        "Rank 5 on node03 is in all_gather, the other 5 in all_reduce.")
    assert merged.verdict.evidence[0].endswith(": node01 ranks 0-1, node02 ranks 2-3, "
                                               "node03 rank 4")
    assert merged.job.expected_ranks == 6


def test_the_same_node_twice_is_counted_once(snapshots) -> None:
    merged = merge([snapshots[0], snapshots[0], snapshots[1]])
    assert _ranks_by_host(merged) == {"node01": {0, 1}, "node02": {2, 3}}


def test_a_dump_without_host_names_takes_the_node_it_came_from() -> None:
    raw = [json.loads((FIXTURES / f"gloo3x2-{n}.json").read_text()) for n in NODES]
    for data in raw:
        for proc in data["processes"]:
            proc["host"] = None
    merged = merge([from_dict(d) for d in raw], nodes=list(NODES))
    assert _ranks_by_host(merged) == {"node01": {0, 1}, "node02": {2, 3}, "node03": {4, 5}}


def test_a_node_that_did_not_answer_is_named_with_what_is_unknown(snapshots) -> None:
    merged = merge([snapshots[0], snapshots[2]],
                   unanswered=[("node02", "ssh timed out after 10 s")])
    summary = merged.verdict.summary
    assert merged.verdict.kind == VerdictKind.MISMATCHED_COLLECTIVES
    assert "Rank 5 on node03 is in all_gather, the other 3 in all_reduce." in summary
    assert "2 of 3 nodes answered; node02: ssh timed out after 10 s." in summary
    assert "This verdict is drawn from ranks 0-1,4-5 only. Ranks 2-3 are unknown." in summary


def test_per_node_memory_findings_name_their_node(snapshots) -> None:
    # One memory finding per node: without the node's name, three look-alike lines.
    merged = merge(snapshots)
    usage = [f.message for f in merged.findings if f.id == "mem.usage"]
    assert sorted(m.split(":", 1)[0] for m in usage) == ["On node01", "On node02", "On node03"]
