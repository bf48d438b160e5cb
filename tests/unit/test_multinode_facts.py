"""The verdict's facts are keyed by (host, PID): each rank's own category and stuck-ness.

tests/fixtures/multinode/gloo4x2-merged.json: the real hung 4-node gloo job of the namespace
cluster (ranks 0-1 on node01, 2-3 on node02, 4-5 on node03, 6-7 on node04; rank 7 in
all_gather, the others in all_reduce). PID 14 is rank 3 on node02, rank 5 on node03 and rank 7
on node04; PID 13 is a rank on three nodes too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import support

from hangscope.analyze import analyze, rules
from hangscope.analyze.evidence.facts import facts_of
from hangscope.analyze.merge import merge
from hangscope.model import Category, Snapshot, VerdictKind
from hangscope.model.serialize import from_dict, load

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GLOO4X2 = FIXTURES / "multinode" / "gloo4x2-merged.json"
STRAGGLER = FIXTURES / "snapshots" / "straggler.json"  # one node "vm": rank 3 (PID 8035) runs
NODE02 = FIXTURES / "multinode" / "gloo3x2-node02.json"  # node02: ranks 2-3 in all_reduce
#: node02's PIDs rewritten onto the PIDs of ranks 2 and 3 on "vm" (PID 13 -> 8034, 14 -> 8035).
COLLIDE = {13: 8034, 14: 8035}
_PID_FIELDS = frozenset({"pid", "ppid", "tid", "working_tid", "children", "pids", "suspects",
                         "launcher", "target"})


def _rewrite_pids(node: object, pids: dict[int, int], field: str | None = None) -> object:
    """The dump with every PID (and the main thread's TID, which is the PID) rewritten."""
    if isinstance(node, dict):
        return {k: _rewrite_pids(v, pids, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_pids(v, pids, field) for v in node]
    if field in _PID_FIELDS and isinstance(node, int) and not isinstance(node, bool):
        return pids.get(node, node)
    return node


@pytest.fixture(scope="module")
def gloo4x2() -> Snapshot:
    return analyze(load(str(GLOO4X2)))


@pytest.fixture(scope="module")
def colliding(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two real single-node dumps of hung gloo jobs, merged as two nodes, whose PIDs collide.

    Nothing is changed but node02's PIDs, rewritten (COLLIDE) so that PID 8035 is the running
    rank 3 on "vm" (straggler.json) and the waiting rank 3 on node02; 8034 waits on both.
    """
    data = json.loads(NODE02.read_text())
    path = tmp_path_factory.mktemp("collide") / "node02-collide.json"
    path.write_text(json.dumps(_rewrite_pids(data, COLLIDE)))
    return [str(STRAGGLER), str(path)]


def test_each_shared_pid_has_its_own_facts(gloo4x2) -> None:
    facts = facts_of(gloo4x2)
    assert len(facts.categories) == len(facts.subjects) == 8
    for host in ("node02", "node03", "node04"):
        assert facts.categories[(host, 14)] is Category.COLLECTIVE
        assert (host, 14) in facts.stuck and (host, 13) in facts.stuck
    assert not facts.moving


def test_the_mismatch_names_rank_7_on_node04_only(gloo4x2) -> None:
    verdict = rules.mismatched_collectives(facts_of(gloo4x2))
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES
    assert "The odd one out is rank 7." in verdict.summary
    assert (verdict.suspects, verdict.suspect_hosts) == ((14,), ("node04",))
    final = gloo4x2.verdict
    assert (final.suspects, final.suspect_hosts) == ((14,), ("node04",))
    flagged = sorted(p.rank.global_rank for p in gloo4x2.subjects if final.is_suspect(p))
    assert flagged == [7]  # not ranks 3 and 5, which share its PID on node02 and node03


def test_the_merged_facts_read_each_ranks_own_category(colliding) -> None:
    merged = merge([from_dict(json.loads(Path(p).read_text())) for p in colliding])
    facts = facts_of(merged)
    assert facts.categories[("vm", 8035)] is Category.RUNNING
    assert facts.categories[("node02", 8035)] is Category.COLLECTIVE
    assert facts.categories[("node02", 8034)] is Category.COLLECTIVE
    # The two jobs wait at different sites: ranks 0-2 of vm against ranks 2-3 of node02. Keyed
    # by PID alone, vm's running rank 3 read node02's "collective" and became a third,
    # one-rank side of the mismatch, and a suspect.
    verdict = merged.verdict
    assert verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict.summary
    assert "ranks 0-2 wait in all_reduce at train_step (straggler.py:80); ranks 2-3 wait in " \
        "all_reduce at exchange_gradients (worker.py:34). The odd one out is ranks 2-3." \
        in verdict.summary
    assert (verdict.suspects, verdict.suspect_hosts) == ((8034, 8035), ("node02", "node02"))
    suspects = [(p.host, p.pid) for p in merged.processes if verdict.is_suspect(p)]
    assert suspects == [("node02", 8034), ("node02", 8035)]


def test_hangscope_merge_json_names_each_rank_on_its_node(colliding) -> None:
    result = support.run_cli("merge", "--format", "json", *colliding)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives"
    assert (verdict["suspects"], verdict["suspect_hosts"]) == ([8034, 8035], ["node02"] * 2)
    groups = {(tuple(g["hosts"]), tuple(g["pids"])): g["category"] for g in data["groups"]}
    assert groups[(("vm",), (8035,))] == "running"
    assert groups[(("node02", "node02"), (8034, 8035))] == "collective"


def test_a_stopped_rank_is_the_suspect_on_its_own_node_only() -> None:
    """stopped_rank_shared_log (node "vm": rank 3, PID 25172, stopped) merged with node02,
    whose PIDs are rewritten (nothing else) so that rank 3 of node02, waiting, is PID 25172."""
    node02 = from_dict(_rewrite_pids(json.loads(NODE02.read_text()), {14: 25172}))
    stopped = load(str(FIXTURES / "blind" / "stopped_rank_shared_log.dump.json"))
    merged = merge([stopped, node02])
    facts = facts_of(merged)
    assert facts.categories[("vm", 25172)] is Category.STOPPED
    assert facts.categories[("node02", 25172)] is Category.COLLECTIVE
    verdict = rules.missing_rank(facts)
    assert verdict is not None and verdict.kind is VerdictKind.MISSING_RANK
    assert (verdict.suspects, verdict.suspect_hosts) == ((25172,), ("vm",))
    assert "rank 3 (PID 25172) is stopped" in verdict.summary, verdict.summary
    assert [(p.host, p.pid) for p in merged.processes if verdict.is_suspect(p)] == [
        ("vm", 25172)]
