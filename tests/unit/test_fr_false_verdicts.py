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


def test_a_rank_stopped_before_its_subgroups_first_collective_is_behind() -> None:
    # GIVEN tp groups [0, 1] and [2, 3]; rank 3 stopped after default_pg #2, before tp #1,
    # which rank 2 waits in (rank 3's status lists tp with nothing enqueued)
    # WHEN the dumps are judged
    (c,) = _said("stopped_before_subgroup")
    # THEN rank 3 is behind in its tp group: it has not reached #1, the all_gather rank 2 is in
    assert (c.kind, c.ranks, c.pids, c.seq, c.ops) == (
        ev.BEHIND, (3,), (103,), 1, ("_all_gather_base",))
    assert "rank 3 enqueued no collective in it; rank 2 reached #1" in c.sentence


def test_a_subgroup_every_member_reached_says_nothing() -> None:
    assert _said("ok_subgroup_reached") == []


def test_wrapped_buffers_compare_only_the_seqs_every_rank_holds() -> None:
    # GIVEN rank 1 reduces Half where ranks 0 and 2 reduce Float, from #1 on; rank 0's and
    # rank 2's ring buffers wrapped (they hold #4 and #5 on)
    # WHEN the dumps are judged
    (c,) = _said("wrapped_two_ranks_odd_dtype")
    # THEN the first seq all three hold whole (#6) names rank 1 alone, not ranks 0 and 1 at #5
    assert (c.kind, c.ranks, c.seq) == (ev.MISMATCH, (1,), 6)
    assert "ranks 0 and 2 called all_reduce of Float; rank 1 called all_reduce of Half" \
        in c.sentence


def test_wrapped_buffers_that_agree_say_nothing() -> None:
    assert _said("ok_wrapped_two_ranks") == []


def test_a_ring_of_receives_nobody_sends_is_a_p2p_mismatch_not_a_rank_behind() -> None:
    # GIVEN three ranks that passed a tensor round a ring, then each receives from its next
    # neighbour and nobody sends
    # WHEN the dumps are judged
    (c,) = _said("recv_ring")
    # THEN every rank waits in an unmatched recv: a mismatch of the three, nobody behind
    assert (c.kind, c.ranks, c.ops) == (ev.MISMATCH, (0, 1, 2), ("recv", "recv", "recv"))
    assert "each waits to receive, nobody sends" in c.sentence


def test_two_ranks_that_both_send_to_each_other_unreceived() -> None:
    d = b.job(2)
    b.add(d, 0, "send 0->1", [[4]], [], state="started")
    b.add(d, 1, "send 1->0", [[4]], [], state="started")
    (c,) = _judge(d).conclusions
    assert (c.kind, c.ranks) == (ev.MISMATCH, (0, 1))
    assert "both wait to send, nobody receives" in c.sentence


def test_a_ring_whose_sends_match_its_receives_says_nothing() -> None:
    assert _said("ok_p2p_ring") == []


def test_a_receive_whose_sender_is_in_a_collective_still_names_the_sender_behind() -> None:
    # the chain ends at a rank that waits in no p2p op: that rank has not posted its send
    # (NCCL: rank 1's recv and its next all_reduce both enqueued, neither can end)
    d = b.job(2)
    b.add(d, 1, "recv 1<-0", [], [[4]], state="started")
    for r in range(2):
        b.add(d, r, "all_reduce", [[4]], state="started")
    (c,) = _judge(d).conclusions
    assert c.ranks == (0,) and "rank 0 has not posted its send" in c.sentence


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
