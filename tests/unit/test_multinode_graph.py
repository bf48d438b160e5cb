"""The merged call tree as Mermaid and SVG, from real dumps of the hung 3-node gloo job (the
1,000-node case is tests/scale/test_multinode_scale.py: its input takes seconds to build)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hangscope.analyze.merge import merge
from hangscope.model.serialize import load
from hangscope.render.graph import boxes_of, mermaid, svg

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "multinode"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def three_nodes():
    return merge([load(FIXTURES / f"gloo3x2-node0{i}.json") for i in (1, 2, 3)])


def test_mermaid_marks_the_odd_branch_with_its_rank_and_node(three_nodes) -> None:
    text = mermaid(three_nodes)
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    odd = next(ln.split()[1] for ln in lines if ln.strip().startswith("class ") and
               ln.endswith(" odd"))
    box = next(ln for ln in lines if ln.strip().startswith(f'{odd}["'))
    assert "all_gather" in box and "<b>rank 5 on node03</b>" in box
    # Labels are quoted; angle brackets of frame names are Mermaid entities, not HTML.
    assert "#lt;module#gt; (worker.py:61)" in text and "<module>" not in text


def test_shared_frames_collapse_into_few_boxes(three_nodes) -> None:
    root = boxes_of(three_nodes)
    module = root.children[0]
    assert module.ranks == (0, 1, 2, 3, 4, 5)
    assert [len(b.ranks) for b in module.children] == [5, 1]
    assert [b.odd for b in module.children] == [False, True]


def test_svg_is_valid_and_shows_one_red_box(three_nodes) -> None:
    tree = ET.fromstring(svg(three_nodes))
    red = [r for r in tree.iter(f"{SVG}rect") if r.get("stroke") == "#cf222e"
           and r.get("rx")]
    assert len(red) == 1
    texts = [t.text for t in tree.iter(f"{SVG}text")]
    assert "rank 5 on node03" in texts
    assert texts[0].startswith("Rank 5 on node03 is in all_gather")
