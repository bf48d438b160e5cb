"""Collectives seen in the dense samples of a real 4-rank gloo job (progress_gloo.py mismatch:
ranks 0-2 loop in all_reduce, rank 3 in all_gather), from the recorded ProgressEvidence."""

from __future__ import annotations

import json
from pathlib import Path

from hangscope.analyze.evidence.progress import decide_all
from hangscope.model.progress import ProgressEvidence
from hangscope.model.serialize import decode

RECORDED = Path(__file__).parent.parent / "fixtures" / "progress" / "gloo_mismatch.json"


def test_given_dense_samples_then_each_rank_names_the_collective_it_was_seen_in() -> None:
    evidence = decode(ProgressEvidence, json.loads(RECORDED.read_text()))
    seen = [r.seen for r in decide_all(evidence)]
    assert seen == [("all_reduce at worker (progress_gloo.py:92)",)] * 3 + [
        ("all_gather at worker (progress_gloo.py:89)",)]
