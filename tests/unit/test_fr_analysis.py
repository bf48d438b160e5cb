"""The Flight Recorder analysis against PyTorch's own test vectors, the cases fr_trace gets
wrong, and real gloo dumps (tests/fixtures/fr_gloo, recorded by record_fr_gloo.py).

The vectors of PyTorch's test/distributed/flight_recorder/test_fr_analysis.py (torch 2.13) are
ported as data: each ``match_one_event`` assertion is a row of MATCH_ONE_EVENT, each
``testBuildDB`` case a test here; the expected answer is PyTorch's, in hangscope's words
(FULLY_MATCHED and UNDECIDED: agree; COLLECTIVE_TYPE_MISMATCH: op; SIZE_OR_SYNTAX_MISMATCH:
sizes; COLLECTIVE_DTYPE_MISMATCH: dtype; COLLECTIVE_STATE_MISMATCH: state).
"""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import fr_builders as b
import pytest

from hangscope.analyze.evidence.collectives import analyze
from hangscope.analyze.evidence.flightrec import fr_match
from hangscope.analyze.evidence.flightrec.collectives_fr import from_fr
from hangscope.collect import flightrec
from hangscope.model import nccl as ev

GLOO = Path(__file__).resolve().parent.parent / "fixtures" / "fr_gloo"
NCCL = Path(__file__).resolve().parent.parent / "fixtures" / "nccl" / "flight_recorder"


def _entry(raw: dict[str, Any]) -> ev.FrEntry:
    return flightrec.parse_dump({"entries": [raw]}, 0, "built").entries[0]


def _parse(dumps: dict[Any, dict[str, Any]]) -> list[ev.FrDump]:
    return [flightrec.parse_dump(copy.deepcopy(d), d["rank"], f"built/{d['rank']}")
            for d in dumps.values()]


def _answer(a: dict[str, Any], c: dict[str, Any], size: int = 2) -> str:
    x, y = [_entry(a)], [_entry(c)]
    diff = fr_match.list_diff(x, y, size) or fr_match.state_diff(x, y)
    return diff.what if diff else "agree"


# --- test_match_one_event: (event a, event b, PyTorch's MatchState in our words) -------------
E1 = b.event("all_reduce", [[4, 4]], [[4, 4]], "scheduled", 1)
MATCH_ONE_EVENT = [
    ("e1 e1", E1, E1, "agree"),
    ("e1 e2", E1, b.event("all_gather", [[4, 4]], [[4, 4]], "scheduled", 1), "op"),
    ("e3 e4 all_to_all", b.event("all_to_all", [[4, 4]], [[4, 4]], "scheduled", 1),
     b.event("all_to_all", [[4, 4]], [[4, 4]], "scheduled", 1), "agree"),
    ("e1 e5", E1, b.event("all_reduce", [[5, 4]], [[4, 4]], "scheduled", 1, 1), "sizes"),
    ("e1 e6", E1, b.event("all_reduce", [[4, 4]], [[5, 4]], "scheduled", 1, 2), "sizes"),
    ("e7 e7", b.event("all_reduce", [[4, 4]], [[5, 4]], "scheduled", 2),
     b.event("all_reduce", [[4, 4]], [[5, 4]], "scheduled", 2), "sizes"),
    ("e1 e9", E1, b.event("all_reduce", [[4, 4]], [[4, 4]], "completed", 1), "state"),
    ("e10 e9", b.event("all_reduce", [[4, 4]], [[4, 4]], "completed", 1, out_dtypes="float16"),
     b.event("all_reduce", [[4, 4]], [[4, 4]], "completed", 1), "dtype"),
    ("e11 e12 gather", b.event("gather", [[4, 4]], [[4, 4], [4, 4]], "completed", 1),
     b.event("gather", [[4, 4]], [[]], "completed", 1, out_dtypes=""), "agree"),
    ("e11 e13 gather", b.event("gather", [[4, 4]], [[4, 4], [4, 4]], "completed", 1),
     b.event("gather", [[4, 4]], [[4, 4]], "completed", 1, out_dtypes=""), "agree"),
]


@pytest.mark.parametrize(("name", "a", "c", "expected"), MATCH_ONE_EVENT,
                         ids=[row[0] for row in MATCH_ONE_EVENT])
def test_pytorch_match_one_event(name: str, a: dict, c: dict, expected: str) -> None:
    assert _answer(a, c) == expected


# test_all_events: every collective PyTorch's analyser knows, matched against itself.
COLLECTIVES = ["broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather",
               "all_gather_single", "all_gather_v", "all_reduce", "_all_gather_base",
               "all_gather_into_tensor_coalesced", "reduce_scatter", "reduce_scatter_single",
               "reduce_scatter_v", "reduce_scatter_tensor_coalesced", "_reduce_scatter_base",
               "gather", "scatter", "all_to_all", "all_to_all_single", "all_to_all_v_single",
               "all_reduce_barrier", "barrier", "split", "new_window", "allreduce_coalesced",
               "ALLGATHER_coalesced", "REDUCE_SCATTER_coalesced"]


@pytest.mark.parametrize("op", COLLECTIVES)
def test_pytorch_all_events_match_themselves(op: str) -> None:
    ins, outs = [[4, 4]], [[4, 4]]
    if op in ("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced"):
        outs = [[8]]
    if op in ("all_gather", "_all_gather_base", "all_gather_into_tensor_coalesced"):
        outs = [[32]]
    e = b.event(op, ins, outs, "scheduled", 1)
    assert _answer(e, e) == "agree"


# --- testBuildDB: whole dumps through the analysis ------------------------------------------

def _build(case: list[tuple[int, tuple]]) -> list[ev.Communicator]:
    details = b.template()
    for rank, args in case:
        details[f"dump_file_rank_{rank}"]["entries"].append(b.entry(*args))
    return from_fr(_parse(details), None)[0]


def test_pytorch_case1_split_groups_sharing_a_name_are_three_collectives() -> None:
    comms = _build([(0, (0, "all_reduce", [[4, 4]], [[4, 4]])),
                    (1, (0, "all_reduce", [[4, 4]], [[4, 4]])),
                    (0, (1, "all_reduce", [[5, 5]], [[5, 5]], "completed", 0, 0, "float32",
                         ("1", "sub_pg"))),
                    (1, (1, "all_reduce", [[5, 5]], [[5, 5]], "completed", 0, 0, "float32",
                         ("1", "sub_pg")))])
    assert sorted((c.id, c.members) for c in comms) == [
        ("0", (0, 1)), ("1[0]", (0,)), ("1[1]", (1,))]
    assert all(c.disagreement is None for c in comms)


def test_pytorch_case2_allreduce_coalesced() -> None:
    comms = _build([(r, (0, "allreduce_coalesced", [[4, 4]], [[4, 4]])) for r in (0, 1)])
    assert [c.disagreement for c in comms] == [None]


def test_pytorch_case3_two_broadcasts_coalesced() -> None:
    comms = _build([(r, args) for r in (0, 1) for args in (
        (0, "broadcast", [[4, 4]], [[4, 4]]), (1, "broadcast", [[4, 4]], [[4, 4]]),
        (2, "coalesced", [[]], [[]]))])
    assert [c.disagreement for c in comms] == [None]


def test_pytorch_case4_uneven_broadcast_in_a_coalesced_group_is_record_1() -> None:
    comms = _build([(0, (0, "_broadcast_oop", [[4, 4]], [[4, 4]])),
                    (0, (1, "_broadcast_oop", [[5, 5]], [[5, 5]])),
                    (0, (2, "ALLGATHER_coalesced", [[]], [[]])),
                    (1, (0, "_broadcast_oop", [[4, 4]], [[4, 4]])),
                    (1, (1, "_broadcast_oop", [[4, 4]], [[4, 4]])),
                    (1, (2, "ALLGATHER_coalesced", [[]], [[]]))])
    (d,) = [c.disagreement for c in comms]
    assert d is not None and d.what == "sizes" and d.sides[0].op == "_broadcast_oop"
    assert {s.record_id for s in d.sides} == {1}


def test_pytorch_case5_reduce_coalesced() -> None:
    comms = _build([(r, args) for r in (0, 1) for args in (
        (0, "_reduce_oop", [[4, 4]], [[4, 4]]), (1, "_reduce_oop", [[4, 4]], [[4, 4]]),
        (2, "REDUCE_SCATTER_coalesced", [[]], [[]]))])
    assert [c.disagreement for c in comms] == [None]


def test_pytorch_case6_empty_coalesced_call_on_rank_0() -> None:
    comms = _build([(0, (0, "all_reduce", [[4, 4]], [[4, 4]])),
                    (1, (0, "all_reduce", [[4, 4]], [[4, 4]])),
                    (1, (1, "_reduce_oop", [[4, 4]], [[4, 4]])),
                    (1, (2, "_reduce_oop", [[4, 4]], [[4, 4]])),
                    (1, (3, "REDUCE_SCATTER_coalesced", [[]], [[]]))])
    assert [c.disagreement for c in comms] == [None]


# --- what fr_trace gets wrong ---------------------------------------------------------------

def _conclusions(dumps: dict[int, dict[str, Any]], live: dict[int, int] | None = None,
                 ) -> list[ev.Conclusion]:
    reading = ev.FrReading(ev.READ, "built", dumps=tuple(_parse(dumps)))
    return list(analyze(None, reading, live).conclusions)


def test_a_lagging_third_rank_does_not_hide_two_ranks_disagreeing() -> None:
    d = b.CASES["lag_third_hides_mismatch"]()
    kinds = {c.kind: c for c in _conclusions(d)}
    assert kinds[ev.MISMATCH].seq == 3 and kinds[ev.MISMATCH].ops == ("all_reduce", "broadcast")
    assert kinds[ev.BEHIND].ranks == (2,)


def test_split_groups_sharing_a_name_with_different_ops_are_no_mismatch() -> None:
    d = b.CASES["split_groups_same_name"]()
    assert [c.kind for c in _conclusions(d)] == []


def test_scatter_gather_and_uneven_all_to_all_single_are_no_mismatch() -> None:
    d = b.CASES["ok_scatter_uneven_a2a"]()
    assert _conclusions(d) == []


def test_all_to_all_whose_totals_differ_is_a_mismatch() -> None:
    d = b.CASES["a2a_totals_differ"]()
    (c,) = _conclusions(d)
    assert c.kind == ev.MISMATCH and "12 elements sent in all, 10 received" in c.sentence


def test_all_gather_base_of_the_wrong_size_is_a_mismatch() -> None:
    """Both ranks gather 4 elements x 2 ranks into 6: fr_trace checks the element count for
    ``all_gather_base``, a name no entry has, so it says nothing (outputs agree)."""
    d = b.CASES["all_gather_base_size"]()
    (c,) = _conclusions(d)
    assert c.kind == ev.MISMATCH and c.seq == 1


def test_all_gather_into_a_list_is_no_mismatch() -> None:
    """gloo records the list of outputs: the first tensor alone is not the output."""
    d = b.CASES["ok_all_gather_list"]()
    assert _conclusions(d) == []


def test_coalesced_group_every_entry_compared() -> None:
    d = b.CASES["coalesced_entry_differs"]()
    (c,) = _conclusions(d)
    assert c.kind == ev.MISMATCH and "(input sizes differ)" in c.sentence


def test_coalesced_group_of_another_length_is_a_mismatch() -> None:
    d = b.CASES["coalesced_length_differs"]()
    (c,) = _conclusions(d)
    assert c.kind == ev.MISMATCH and c.seq == 1


def test_p2p_send_and_recv_of_different_sizes() -> None:
    d = b.CASES["p2p_sizes_differ"]()
    (c,) = _conclusions(d)
    assert c.kind == ev.MISMATCH and "Point-to-point" in c.sentence and "[[8]]" in c.sentence


def test_p2p_send_with_no_recv_posted() -> None:
    d = b.CASES["p2p_no_recv"]()
    (c,) = _conclusions(d)
    assert c.kind == ev.BEHIND and "send #1 has no matching recv posted" in c.sentence
    assert c.ranks == (1,) and "rank 1 has not posted its recv" in c.sentence


def test_p2p_that_match_say_nothing() -> None:
    d = b.CASES["ok_p2p"]()
    assert _conclusions(d) == []


def test_state_a_rank_has_not_started_what_another_completed_is_behind_not_mismatch() -> None:
    d = b.CASES["state_not_started"]()
    (c,) = _conclusions(d)
    assert c.kind == ev.BEHIND and c.ranks == (1,) and "only scheduled" in c.sentence


def test_wrapped_buffer_whose_first_coalesced_group_lost_its_start() -> None:
    d = b.CASES["ok_wrapped_coalesced"]()
    assert _conclusions(d) == []


def test_call_site_skips_stdlib_and_site_packages_wrappers() -> None:
    stack = b.frames(("all_reduce", "/opt/venv/lib/python3.12/site-packages/torch/distributed/"
                                    "distributed_c10d.py", 3068),
                     ("sync", "/opt/venv/lib/python3.12/site-packages/torch/utils/x.py", 9),
                     ("__exit__", "/usr/lib/python3.12/contextlib.py", 144),
                     ("train_step", "/srv/job/train.py", 57))
    assert flightrec.call_site(stack) == "train_step (train.py:57)"
    lib = b.frames(("all_reduce", "/v/site-packages/torch/distributed/distributed_c10d.py", 1),
                   ("__exit__", "/usr/lib/python3.12/contextlib.py", 144),
                   ("reduce", "/v/lib/python3.12/site-packages/lightning/pytorch/x.py", 88),
                   ("run", "/usr/lib/python3.12/threading.py", 1))
    assert flightrec.call_site(lib) == "reduce (lightning/pytorch/x.py:88)"


# --- real gloo dumps ------------------------------------------------------------------------

def _gloo(case: str, form: str = "") -> list[ev.FrDump]:
    folder = GLOO / case / form
    out = []
    for path in sorted(folder.glob("nccl_trace_rank_*")):
        rank = int(path.name.rsplit("_", 1)[1])
        out.append(flightrec.parse_dump(flightrec.load_bytes(path.read_bytes()), rank, str(path)))
    assert out, f"no dumps in {folder}: run tests/fixtures/record_fr_gloo.py {case}"
    return out


def _real(case: str, form: str = "") -> list[ev.Conclusion]:
    dumps = _gloo(case, form)
    live = {d.rank: 1000 + d.rank for d in dumps}
    return list(analyze(None, ev.FrReading(ev.READ, "real", dumps=tuple(dumps)), live)
                .conclusions)


@pytest.mark.parametrize("form", ["", "json"])
def test_real_correct_program_scatter_gather_uneven_all_to_all(form: str) -> None:
    assert _real("ok_scatter_a2a", form) == []


@pytest.mark.parametrize(("case", "what", "suspects"), [
    ("wrong_op", "op differs", (0, 1)), ("wrong_op_4", "op differs", (1,)),
    ("wrong_dtype", "dtype differs", (0, 1))])
def test_real_mismatches_name_the_odd_rank_out(case: str, what: str,
                                               suspects: tuple[int, ...]) -> None:
    (c,) = [c for c in _real(case) if c.kind == ev.MISMATCH]
    assert what in c.sentence and c.ranks == suspects and c.seq == 2
    assert all(site.endswith(")") and "fr_gloo_cases.py" in site for site in c.sites)


def test_real_lagging_third_rank_and_the_two_that_disagree() -> None:
    found = {c.kind: c for c in _real("lag_hides_mismatch")}
    assert found[ev.MISMATCH].seq == 3 and set(found[ev.MISMATCH].ops) == {"all_reduce",
                                                                           "broadcast"}
    assert found[ev.BEHIND].ranks == (2,)


def test_real_subgroup_non_member_is_never_behind_in_it() -> None:
    found = _real("subgroup_nonmember")
    behind = [c for c in found if c.kind == ev.BEHIND]
    assert [(c.communicator, c.ranks) for c in behind] == [("0", (1,))], found


def test_real_hashed_subgroup_status_mapped_through_the_group_id() -> None:
    dumps = _gloo("hashed_subgroup_behind")
    names = {g.name for d in dumps for g in d.groups}
    assert "1" not in names and len(names) == 2  # the uid "1" became the group's hash name
    (c,) = [c for c in _real("hashed_subgroup_behind") if c.kind == ev.BEHIND]
    assert c.ranks == (1,) and c.communicator != "0" and c.seq == 3


def test_real_behind() -> None:
    (c,) = _real("behind")
    assert c.kind == ev.BEHIND and c.ranks == (1,) and c.ops == ("all_reduce",) and c.seq == 3


def test_real_wrapped_ring_buffer() -> None:
    dumps = _gloo("wrapped_buffer")
    assert all(min(e.record_id or 0 for e in d.entries) > 0 for d in dumps)
    (c,) = [c for c in _real("wrapped_buffer") if c.kind == ev.MISMATCH]
    assert c.seq == 31


def test_real_pickle_and_json_forms_agree() -> None:
    """The JSON form carries no stacks (no call sites); everything else is the same."""
    def said(case: str, form: str) -> list[tuple]:
        return [(c.kind, c.communicator, c.ranks, c.ops, c.seq) for c in _real(case, form)]
    for case in sorted(p.name for p in GLOO.iterdir() if p.is_dir()):
        assert said(case, "") == said(case, "json"), case


def test_real_dumps_hold_plain_data_only() -> None:
    for path in GLOO.glob("*/nccl_trace_rank_*"):
        flightrec.load_bytes(path.read_bytes())  # the no-class unpickler refuses anything else
        assert isinstance(pickle.loads(path.read_bytes()), dict)
    for path in GLOO.glob("*/json/nccl_trace_rank_*"):
        assert isinstance(json.loads(path.read_text()), dict)


def test_nccl_captures_keep_their_verdicts() -> None:
    def read(case: str) -> list[ev.FrDump]:
        return [flightrec.parse_dump(flightrec.load_bytes(p.read_bytes()),
                                     int(p.name.rsplit("_", 1)[1]), str(p))
                for p in sorted((NCCL / case).glob("nccl_trace_rank_*"))]
    (c,) = analyze(None, ev.FrReading(ev.READ, "", dumps=tuple(read("behind"))),
                   {0: 10, 1: 11}).conclusions
    assert (c.kind, c.ranks, c.seq, c.sites) == (ev.BEHIND, (1,), 2,
                                                 ("decode_step (serve.py:107)",))


def test_a_live_rank_that_just_wrote_its_dump_is_never_called_exited() -> None:
    """The false claim of issue 19: an mp.spawn rank with no RANK in its environment is not
    in ``live``; its dump was written during this read, so it was alive."""
    d = b.job(2)
    for r in range(2):
        b.add(d, r, "all_reduce", [[4]])
    reading = ev.FrReading(ev.READ, "", dumps=tuple(_parse(d)), fresh=(0, 1))
    assert analyze(None, reading, {0: 100}).conclusions == ()
    stale = ev.FrReading(ev.READ, "", dumps=tuple(_parse(d)))
    assert analyze(None, stale, {0: 100}, unplaced=1).conclusions == ()
    (c,) = analyze(None, stale, {0: 100}).conclusions
    assert c.kind == ev.MISSING and "exited" not in c.sentence
