"""Live NCCL evidence from one H200 (tests/fixtures/nccl/h200_single; docs/nccl.md).

A world-size-1 NCCL job (demo/gpu/nccl_jobs.py --only single), hung on a spinning kernel: NCCL
2.28.9's RAS answer read by the collector, and the Flight Recorder dump it wrote when asked
through its debug-info pipe. GIVEN those real answers WHEN parsed and analysed THEN they read as
one healthy one-rank communicator: no rank is called behind, missing or mismatched.
"""

from __future__ import annotations

import json

import support

from hangscope.analyze.evidence.collectives import analyze
from hangscope.collect import flightrec
from hangscope.collect.ras_format import parse
from hangscope.model import nccl as ev

H200 = support.FIXTURES / "nccl" / "h200_single"


def _ras() -> ev.RasReading:
    raw = json.loads((H200 / "ras_plain.json").read_text())
    text = raw if isinstance(raw, str) else json.dumps(raw)
    return ev.RasReading(status=ev.READ, note="", report=parse(text))


def _fr() -> ev.FrReading:
    path = H200 / "nccl_trace_rank_0"
    dump = flightrec.parse_dump(flightrec.load_bytes(path.read_bytes()), 0, str(path), 0.0)
    return ev.FrReading(status=ev.READ, note="", dumps=(dump,))


def test_live_ras_answer_is_one_communicator_of_one_rank() -> None:
    report = _ras().report
    assert report is not None
    (comm,) = report.communicators
    assert comm.size == 1


def test_live_flight_recorder_dump_has_the_warm_up_all_reduces_with_call_sites() -> None:
    (dump,) = _fr().dumps
    assert [e.op for e in dump.entries] == ["all_reduce"] * 4
    assert all(e.state == "completed" for e in dump.entries)
    assert all(e.site and "nccl_jobs.py" in e.site for e in dump.entries)


def test_one_healthy_rank_is_not_a_culprit() -> None:
    found = analyze(_ras(), _fr(), live={0: 100}, host="h200")
    assert found.conclusions == ()
    assert found.communicators
