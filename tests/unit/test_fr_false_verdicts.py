"""Issue 35's false Flight Recorder verdicts, each in another shape than the one reported, with
its healthy twin (the dump sets are built in PyTorch's shape by tests/fr_builders.py).

Reported: a rank stopped while its peers wait (neither missing nor behind); a wrapped ring
buffer (a false mismatch between ranks 2 and 3 where rank 3 alone differs); two ranks that
both ``recv`` from each other (a false "rank 0 behind"); an ``all_gather`` whose outputs differ
(reported as an input size mismatch).
"""

from __future__ import annotations

import copy
from typing import Any

import fr_builders as b

from hangscope.analyze.evidence.collectives import analyze
from hangscope.collect import flightrec
from hangscope.model import nccl as ev


def _judge(dumps: dict[int, dict[str, Any]]) -> ev.CollectiveEvidence:
    parsed = tuple(flightrec.parse_dump(copy.deepcopy(d), d["rank"], f"built/{d['rank']}")
                   for d in dumps.values())
    return analyze(None, ev.FrReading(ev.READ, "built", dumps=parsed),
                   {d["rank"]: 100 + d["rank"] for d in dumps.values()})


def _said(name: str) -> list[ev.Conclusion]:
    return list(_judge(b.CASES[name]()).conclusions)










def test_an_all_gather_whose_outputs_differ_names_the_output_sizes() -> None:
    # GIVEN four ranks gather equal inputs into a list; rank 2's list has 3 tensors, not 4
    # WHEN the dumps are judged
    found = _judge(b.CASES["all_gather_outputs_differ"]())
    (c,) = found.conclusions
    # THEN the mismatch is of the output sizes, rank 2 alone; no input is said to differ
    assert (c.kind, c.ranks, c.seq) == (ev.MISMATCH, (2,), 2)
    assert "(output sizes differ)" in c.sentence and "input" not in c.sentence
    (d,) = [g.disagreement for g in found.communicators if g.disagreement]
    assert [s.detail for s in d.sides] == ["output sizes [[2, 4], [2, 4], [2, 4], [2, 4]]",
                                           "output sizes [[2, 4], [2, 4], [2, 4]]"]


def test_an_all_gather_whose_inputs_differ_names_the_input_sizes() -> None:
    d = b.job(2)
    b.add(d, 0, "all_gather_into_tensor", [[4]], [[8]])
    b.add(d, 1, "all_gather_into_tensor", [[2]], [[8]])
    (c,) = _judge(d).conclusions
    assert c.kind == ev.MISMATCH and "(input sizes differ)" in c.sentence


def test_all_gathers_that_agree_say_nothing() -> None:
    assert _said("ok_all_gather_outputs") == []
