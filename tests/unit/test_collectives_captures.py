"""The collective analysis on the real RAS and Flight Recorder captures of three hung jobs."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from hangscope.analyze.evidence.collectives import analyze, missing_evidence
from hangscope.collect import flightrec
from hangscope.collect.ras_format import parse
from hangscope.model import nccl as ev
from hangscope.model import serialize

NCCL = Path(__file__).resolve().parent.parent / "fixtures" / "nccl"
# The PIDs of the ranks still alive when each capture was taken (README of the captures).
LIVE = {"behind": {0: 622, 1: 623}, "extra_op": {1: 757}, "wrong_op": {0: 890}}


def _ras(case: str, fmt: str) -> ev.RasReading:
    text = (NCCL / "ras" / f"{case}.{fmt}").read_text()
    return ev.RasReading(ev.READ, "read", report=parse(text))


def _fr(case: str) -> ev.FrReading:
    dumps = []
    for path in sorted((NCCL / "flight_recorder" / case).iterdir()):
        rank = int(path.name.rsplit("_", 1)[1])
        dumps.append(flightrec.parse_dump(flightrec.load_bytes(path.read_bytes()), rank, str(path)))
    return ev.FrReading(ev.READ, "read", dumps=tuple(dumps))


def _kinds(evidence: ev.CollectiveEvidence) -> list[tuple[str, tuple[int, ...]]]:
    return [(c.kind, c.ranks) for c in evidence.conclusions]


@pytest.mark.parametrize("fmt", ["json", "txt"])
def test_behind_from_ras_alone(fmt: str) -> None:
    found = analyze(_ras("behind", fmt), None, LIVE["behind"])
    (c,) = found.conclusions
    assert (c.kind, c.ranks, c.pids, c.ops, c.source) == (
        ev.BEHIND, (1,), (623,), ("AllReduce",), ev.SOURCE_RAS)
    assert "rank 1 has launched AllReduce up to #1" in c.sentence
    positions = {p.rank: p.counts["AllReduce"] for p in found.communicators[0].positions}
    assert positions == {0: 2, 1: 1}


def test_behind_with_flight_recorder_names_the_op_and_site() -> None:
    found = analyze(_ras("behind", "json"), _fr("behind"), LIVE["behind"])
    (c,) = found.conclusions
    assert (c.kind, c.ranks, c.seq, c.ops, c.source) == (ev.BEHIND, (1,), 2, ("all_reduce",),
                                                         "ras+fr")
    assert c.sites == ("decode_step (serve.py:107)",) and c.pids == (623,)
    fr_group = next(x for x in found.communicators if x.source == ev.SOURCE_FR)
    assert {p.global_rank: (p.last_enqueued, p.last_op) for p in fr_group.positions} == {
        0: (2, "all_reduce"), 1: (1, "all_reduce")}


@pytest.mark.parametrize("case,gone,pid", [("extra_op", 0, 756), ("wrong_op", 1, 891)])
@pytest.mark.parametrize("fmt", ["json", "txt"])
def test_missing_rank_from_ras_alone(case: str, gone: int, pid: int, fmt: str) -> None:
    found = analyze(_ras(case, fmt), None, LIVE[case])
    (c,) = found.conclusions
    assert (c.kind, c.ranks, c.pids) == (ev.MISSING, (gone,), (pid,))
    assert f"PID {pid}" in c.sentence and f"GPU {gone}" in c.sentence


@pytest.mark.parametrize("case,gone", [("extra_op", 0), ("wrong_op", 1)])
def test_missing_rank_ras_and_fr_agree_in_one_conclusion(case: str, gone: int) -> None:
    found = analyze(_ras(case, "json"), _fr(case), LIVE[case])
    (c,) = found.conclusions
    assert (c.kind, c.ranks, c.source, c.global_ranks) == (ev.MISSING, (gone,), "ras+fr", True)


def test_missing_rank_from_fr_alone() -> None:
    found = analyze(None, _fr("wrong_op"), LIVE["wrong_op"])
    assert _kinds(found) == [(ev.MISSING, (1,))]
    assert found.conclusions[0].source == ev.SOURCE_FR


def test_no_live_map_calls_nobody_missing() -> None:
    found = analyze(None, _fr("wrong_op"), None)
    assert found.conclusions == ()


def _spliced(case_a: str, rank_a: int, case_b: str, rank_b: int) -> ev.FrReading:
    """Two real dumps of one group, as if both ranks had answered: wrong_op's rank 0 went on to
    all_reduce #2 where extra_op's rank 1 called all_gather #2."""
    a = next(d for d in _fr(case_a).dumps if d.rank == rank_a)
    b = next(d for d in _fr(case_b).dumps if d.rank == rank_b)
    return ev.FrReading(ev.READ, "read", dumps=(a, b))


def test_mismatch_first_disagreement_with_both_call_sites() -> None:
    found = analyze(None, _spliced("wrong_op", 0, "extra_op", 1), {0: 890, 1: 757})
    mismatch = next(c for c in found.conclusions if c.kind == ev.MISMATCH)
    assert mismatch.seq == 2
    assert set(mismatch.ops) == {"all_reduce", "all_gather"}
    assert set(mismatch.sites) == {"decode_step (serve.py:107)", "gather_logits (serve.py:114)"}
    assert set(mismatch.ranks) == {0, 1}  # one rank each side: a tie names both
    (group,) = found.communicators
    assert group.disagreement is not None and group.disagreement.what == "op"
    assert found.conclusions[0].kind == ev.MISMATCH  # before the "behind" it causes


def test_size_mismatch_is_named() -> None:
    a = next(d for d in _fr("behind").dumps if d.rank == 0)
    b = next(d for d in _fr("behind").dumps if d.rank == 1)
    first = dataclasses.replace(b.entries[0], input_sizes=((2048,),))
    b = dataclasses.replace(b, entries=(first,))
    found = analyze(None, ev.FrReading(ev.READ, "r", dumps=(a, b)), {0: 1, 1: 2})
    mismatch = next(c for c in found.conclusions if c.kind == ev.MISMATCH)
    assert mismatch.seq == 1 and "(input sizes differ)" in mismatch.sentence


def test_ras_counts_that_cross_are_a_mismatch() -> None:
    """wrong_op with both ranks alive: rank 0 at AllReduce #2, rank 1 at AllGather #1."""
    report = parse((NCCL / "ras" / "behind.json").read_text())
    comm = report.communicators[0]
    r0, r1 = comm.ranks
    r1 = dataclasses.replace(r1, counts={**r1.counts, "AllGather": 1})
    report = dataclasses.replace(report, communicators=(dataclasses.replace(comm, ranks=(r0, r1)),))
    found = analyze(ev.RasReading(ev.READ, "r", report=report), None, {0: 622, 1: 623})
    (c,) = found.conclusions
    assert c.kind == ev.MISMATCH and set(c.ops) == {"AllReduce", "AllGather"}


def test_evidence_round_trips_through_the_dump_serializer() -> None:
    found = analyze(_ras("behind", "json"), _fr("behind"), LIVE["behind"])
    data = json.loads(json.dumps(serialize.to_dict(found)))
    assert serialize._convert(ev.CollectiveEvidence, data, "$") == found
    assert serialize.decode(ev.CollectiveEvidence, serialize.to_dict(found)) == found


@pytest.mark.parametrize("status", [ev.DISABLED, ev.TOO_OLD, ev.NO_LISTENER, ev.NOT_THIS_JOB])
def test_no_evidence_sentence_names_the_launch_variables(status: str) -> None:
    found = analyze(ev.RasReading(status, "n"), ev.FrReading(ev.NONE_FOUND, "n"), {0: 1})
    assert found.communicators == ()
    sentence = found.missing_evidence or ""
    assert "TORCH_NCCL_DEBUG_INFO_PIPE_FILE" in sentence and "TORCH_FR_DUMP_TEMP_FILE" in sentence
    assert sentence.count(".") >= 1 and "\n" not in sentence


def test_gloo_job_is_told_its_stacks_are_the_evidence() -> None:
    sentence = missing_evidence(ev.RasReading(ev.NO_NCCL, "n"), None)
    assert "gloo" in sentence


def test_pickle_fixtures_hold_plain_data_only() -> None:
    """The captures load with the class-refusing unpickler (nothing in them needs a class)."""
    for path in (NCCL / "flight_recorder").rglob("nccl_trace_rank_*"):
        assert isinstance(flightrec.load_bytes(path.read_bytes()), dict)
        assert pickle.loads(path.read_bytes()) == flightrec.load_bytes(path.read_bytes())


def test_text_majority_is_named_from_the_communicator_size() -> None:
    """A 4-rank version of the behind capture as NCCL prints it in text: the outlier rank 0 by
    name, the other three only counted. The analysis names ranks 1-3 as behind."""
    text = (NCCL / "ras" / "behind.txt").read_text()
    text = text.replace("    0         1         1         2         2         2   RUNNING",
                        "    0         1         1         4         4         4   RUNNING")
    text = text.replace(
        "  Rank 1 has launched up to operation 1 -- GPU 1 managed by process 623 on node "
        "192.0.2.2\n", "  3 ranks have launched up to operation 1\n")
    found = analyze(ev.RasReading(ev.READ, "r", report=parse(text)), None, None)
    (c,) = found.conclusions
    assert (c.kind, set(c.ranks), c.global_ranks) == (ev.BEHIND, {1, 2, 3}, False)


def test_multi_node_member_elsewhere_is_not_missing() -> None:
    """One node of a multi-node job: a group member with no process and no dump here may run on
    another node; it is not called missing (RAS, which sees every node, still would)."""
    found = analyze(None, _fr("wrong_op"), LIVE["wrong_op"], all_ranks_local=False)
    assert found.conclusions == ()
    assert analyze(None, _fr("wrong_op"), LIVE["wrong_op"]).conclusions[0].kind == ev.MISSING


def test_live_ranks_helpers_never_and_a_lone_main_is_rank_zero() -> None:
    from hangscope.analyze.evidence.collectives import live_ranks
    from hangscope.model import Process, RankInfo, Role

    procs = [Process(pid=10, role=Role.RANK, rank=RankInfo(global_rank=0)),
             Process(pid=11, role=Role.RANK, rank=RankInfo(global_rank=1), state="Z"),
             Process(pid=12, role=Role.RESOURCE_TRACKER), Process(pid=13, role=Role.LAUNCHER)]
    assert live_ranks(procs) == {0: 10}
    assert live_ranks([Process(pid=20, role=Role.MAIN),
                       Process(pid=21, role=Role.COMPILE_WORKER)]) == {0: 20}
