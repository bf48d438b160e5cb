"""``hangscope merge`` keeps each node's collective evidence (one item per node) and its verdict
uses it; the JSON of the merged job carries both nodes' items."""

from __future__ import annotations

import json
from dataclasses import replace

from support import FIXTURES

from hangscope.analyze.merge import merge
from hangscope.model.serialize import dumps, from_dict, load


def test_merge_keeps_each_nodes_collective_evidence() -> None:
    snap = load(FIXTURES / "nccl" / "gloo_mismatch.dump.json")
    a = replace(snap, collectives=(replace(snap.collectives[0], host="node-a"),))
    b = replace(snap, processes=tuple(replace(p, host="node-b") for p in snap.processes),
                collectives=(replace(snap.collectives[0], host="node-b"),))
    merged = merge([a, b], ["node-a", "node-b"])
    assert [c.host for c in merged.collectives] == ["node-a", "node-b"]
    again = from_dict(json.loads(dumps(merged)))
    assert again.collectives == merged.collectives
    assert merged.verdict is not None
    assert merged.verdict.kind.value == "mismatched_collectives"
    assert "at collective #2" in merged.verdict.summary
