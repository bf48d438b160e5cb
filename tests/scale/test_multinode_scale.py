"""The merged call tree at 1,000 nodes (8,000 ranks) stays readable: a scale tier of its own.

Building the input parses 1,000 real 8-rank dumps (benchmarks/multinode.py renumbers one per
node: ~120 MB of JSON, ~4 s), too slow for the unit tier's seconds; the 3-node graph tests
stay in tests/unit/test_multinode_graph.py. Run: ``python -m pytest tests/scale``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from hangscope.analyze.merge import merge
from hangscope.model import Snapshot
from hangscope.model.serialize import from_dict
from hangscope.render.graph import mermaid, svg


@pytest.fixture(scope="module")
def thousand_nodes() -> Snapshot:
    from benchmarks.multinode import FIXTURE, synthetic_nodes

    texts = synthetic_nodes(1000, json.loads(FIXTURE.read_text()))
    return merge([from_dict(json.loads(t)) for t in texts])


def test_a_thousand_nodes_stay_readable(thousand_nodes: Snapshot) -> None:
    text = mermaid(thousand_nodes)
    boxes = [ln for ln in text.splitlines() if '["' in ln]
    assert len(boxes) == 4  # job, shared <module>, the 7,999, the odd one
    assert any("ranks 0-7998 (7999) on 1000 nodes" in b for b in boxes)
    assert any("rank 7999 on node1000" in b for b in boxes)
    picture = ET.fromstring(svg(thousand_nodes))
    assert float(picture.get("width") or "inf") < 1600
