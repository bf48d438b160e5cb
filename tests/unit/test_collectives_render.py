"""The "Collectives" section of the text and Markdown reports, on real captures and real dumps."""

from __future__ import annotations

import json
from dataclasses import replace

from rich.console import Console
from support import FIXTURES, fixture_path

from hangscope.analyze.evidence.collectives import node_evidence
from hangscope.collect.ras_format import parse
from hangscope.model import nccl as ev
from hangscope.model.serialize import from_dict, load
from hangscope.render import collectives
from hangscope.render.markdown import render_markdown
from hangscope.render.text import report

NCCL = FIXTURES / "nccl"


def _text(snap: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(report(snap))  # type: ignore[arg-type]
    return console.export_text()


def test_gloo_dump_shows_each_rank_position_and_the_first_disagreement() -> None:
    snap = load(NCCL / "gloo_mismatch.dump.json")
    text = _text(snap)
    section = text[text.index("Collectives\n"):text.index("Processes\n")]
    assert "process group 0 (Flight Recorder) · 2 ranks" in section
    assert "#2 all_reduce scheduled (done #1)" in section
    assert "#2 all_gather scheduled (done #1)" in section
    assert ("first disagreement at #2 (op): rank 0: all_reduce at rank_main "
            "(gloo_fr_mismatch.py:49); rank 1: all_gather at rank_main") in section
    md = render_markdown(snap)
    assert "### Collectives" in md and "| 1 | 1 | 6353 | - | - | #2 all_gather scheduled" in md


def test_ras_missing_rank_and_counts_are_shown_from_the_capture() -> None:
    """extra_op's real RAS answer: rank 1's count, and rank 0 missing with PID, GPU, node."""
    reading = ev.RasReading(ev.READ, "read", report=parse(
        (NCCL / "ras" / "extra_op.json").read_text()))
    snap = replace(load(fixture_path("sync")), collectives=(
        node_evidence(reading, None, (), "node-a"),))
    (table,) = collectives.tables(snap)
    assert table.title.startswith("communicator ") and "(NCCL RAS) · 2 ranks" in table.title
    assert table.missing == ("rank 0, PID 756, GPU 0 on 192.0.2.2: no answer from its process "
                             "(exited or hung hard)",)
    assert "missing: rank 0, PID 756" in _text(snap)
    assert [row[5] for row in table.rows] == ["AllGather 1, AllReduce 2"]  # zero counts left out


def test_no_evidence_is_one_line_naming_what_to_set_at_launch() -> None:
    reading = ev.RasReading(ev.NO_LISTENER, "no listener")
    fr = ev.FrReading(ev.NONE_FOUND, "no dump")
    snap = replace(load(fixture_path("sync")), collectives=(
        node_evidence(reading, fr, (), "node-a"),))
    text = _text(snap)
    line = next(x for x in text.splitlines() if x.startswith("No collective evidence"))
    assert "TORCH_NCCL_DEBUG_INFO_PIPE_FILE" in line and "Collectives" in text
    assert "_No collective evidence: " in render_markdown(snap)


def test_a_dump_older_than_the_field_shows_without_the_section() -> None:
    data = json.loads((NCCL / "gloo_mismatch.dump.json").read_text())
    del data["collectives"]
    snap = from_dict(data)
    assert snap.collectives == ()
    text = _text(snap)
    assert "Collectives" not in text and "Processes" in text
    assert "### Collectives" not in render_markdown(snap)
