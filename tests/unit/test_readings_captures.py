"""The raw readings are enough: a dump carrying them (``Snapshot.readings``) gives, saved and
loaded, shown, merged or analysed again, the collectives, progress and verdict of the live
analysis, on the real recorded captures.

GIVEN the real NCCL RAS answers and Flight Recorder dumps of the three hung H200 jobs
(tests/fixtures/nccl) and the real progress window of the hung 4-rank gloo job
(tests/fixtures/progress/gloo_mismatch.json), as the sampler records them WHEN analysed, saved
to JSON and loaded THEN ``show`` prints what was saved, ``merge`` and a re-analysis without the
stored conclusions reach the same ones.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support import FIXTURES, run_cli

from hangscope.analyze import analyze
from hangscope.analyze.merge import merge
from hangscope.collect import flightrec
from hangscope.collect.ras_format import parse
from hangscope.model import Host, Job, Process, RankInfo, Readings, Role, Snapshot
from hangscope.model import nccl as ev
from hangscope.model.progress import ProgressEvidence
from hangscope.model.serialize import decode, dumps, from_dict, load

NCCL = FIXTURES / "nccl"
# The PIDs of the ranks still alive when each capture was taken (README of the captures).
LIVE = {"behind": {0: 622, 1: 623}, "extra_op": {1: 757}, "wrong_op": {0: 890}}
PROGRESS = decode(ProgressEvidence, json.loads(
    (FIXTURES / "progress" / "gloo_mismatch.json").read_text()))


def _readings(case: str) -> Readings:
    ras = ev.RasReading(ev.READ, "NCCL RAS: read", report=parse(
        (NCCL / "ras" / f"{case}.json").read_text()))
    dumps_ = tuple(
        flightrec.parse_dump(flightrec.load_bytes(p.read_bytes()), int(p.name.rsplit("_", 1)[1]),
                             str(p))
        for p in sorted((NCCL / "flight_recorder" / case).iterdir()))
    fr = ev.FrReading(ev.READ, "Flight Recorder: read", dumps=dumps_)
    return Readings(host="h200", ras=ras, flight_recorder=fr, progress=PROGRESS)


def _snapshot(case: str) -> Snapshot:
    ranks = [Process(pid=pid, host="h200", role=Role.RANK, state="S",
                     rank=RankInfo(global_rank=rank, world_size=2))
             for rank, pid in LIVE[case].items()]
    watched = [Process(pid=p.pid, host="h200", role=Role.OTHER, state="S")
               for p in PROGRESS.processes]
    return Snapshot(created="2026-11-29T00:00:00+00:00", hangscope="test",
                    hosts=(Host("h200"),), job=Job(expected_ranks=2),
                    processes=(*ranks, *watched), readings=(_readings(case),))


def _conclusions(snap: Snapshot) -> tuple:
    return snap.verdict, snap.collectives, snap.progress


@pytest.mark.parametrize("case", sorted(LIVE))
def test_saved_dump_reaches_the_live_conclusions(case: str, tmp_path: Path) -> None:
    live = analyze(_snapshot(case))
    assert live.collectives[0].conclusions, "the captures name a culprit"
    assert live.progress is not None and live.progress.ranks
    saved = tmp_path / "dump.json"
    saved.write_text(dumps(live))
    loaded = load(saved)
    assert loaded == live
    assert _conclusions(merge([loaded])) == _conclusions(live)
    assert analyze(loaded) == live  # judging again changes nothing
    bare = replace(loaded, collectives=(), progress=None, verdict=None, groups=(), findings=(),
                   notes=())
    assert _conclusions(analyze(bare)) == _conclusions(live)


def test_show_prints_what_the_dump_saved(tmp_path: Path) -> None:
    live = analyze(_snapshot("behind"))
    saved = tmp_path / "dump.json"
    saved.write_text(dumps(live))
    shown = run_cli("show", str(saved), "--format", "json", timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert _conclusions(from_dict(json.loads(shown.stdout))) == _conclusions(live)


def test_a_dump_without_readings_keeps_what_it_stored() -> None:
    old = load(NCCL / "gloo_mismatch.dump.json")
    assert old.readings == () and old.collectives
    # The stacks' verdict is the analyzer's of today; the collective evidence and progress are
    # those the dump stored (it has nothing to judge them again from).
    for again in (analyze(old), merge([old])):
        assert (again.collectives, again.progress) == (old.collectives, old.progress)
