"""``hangscope merge`` keeps the nodes' measured progress only where PIDs cannot be confused.

Real evidence: two 4-rank gloo jobs recorded on CPU (tests/fixtures/progress/gloo_*.json), one
healthy (sleepy), one hung (mismatch), taken here as the dumps of two nodes.
"""

from __future__ import annotations

import json

import support

from hangscope.analyze.evidence.progress import merge_progress, progress_of
from hangscope.model.progress import JobProgress, ProgressEvidence
from hangscope.model.serialize import decode

PROGRESS = support.FIXTURES / "progress"


def node(name: str) -> tuple[JobProgress, list[int]]:
    evidence = decode(ProgressEvidence, json.loads((PROGRESS / f"{name}.json").read_text()))
    return progress_of(evidence), [p.pid for p in evidence.processes]


def test_given_a_healthy_and_a_hung_node_then_the_merged_job_is_stuck() -> None:
    (healthy, pids_a), (hung, pids_b) = node("gloo_sleepy"), node("gloo_mismatch")
    assert (healthy.decision, hung.decision) == ("progressing", "stuck")
    merged = merge_progress([healthy, hung], [1, *pids_a, 1, *pids_b])  # PID 1 on both: a launcher
    assert merged is not None and merged.decision == "stuck"
    assert {r.pid for r in merged.ranks} == {*pids_a, *pids_b}
    assert merged.seconds == min(healthy.seconds, hung.seconds)


def test_given_a_decided_pid_on_two_nodes_then_no_merged_progress() -> None:
    (healthy, pids_a), (hung, _) = node("gloo_sleepy"), node("gloo_mismatch")
    # the other node has a process with the PID of a decided rank of the first
    assert merge_progress([healthy, hung], [*pids_a, pids_a[0]]) is None


def test_given_a_node_without_progress_then_no_merged_progress() -> None:
    healthy, pids = node("gloo_sleepy")
    assert merge_progress([healthy, None], pids) is None
    assert merge_progress([], []) is None
