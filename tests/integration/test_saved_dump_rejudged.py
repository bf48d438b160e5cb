"""A saved dump says what the live dump said: ``show`` and ``merge`` of the JSON a live
``hangscope dump`` wrote give its verdict, collectives and progress, and the analysis alone
derives those again from the raw readings the dump carries (``Snapshot.readings``).

GIVEN the real 2-rank gloo job hung in mismatched collectives with a Flight Recorder pipe
(tests/targets/gloo_fr_mismatch.py) WHEN dumped to JSON (the Flight Recorder read, progress
watched) THEN show, merge and a re-analysis without the stored conclusions agree with it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from fr_job import gloo_fr_job
from support import poll, run_cli

from hangscope.analyze import analyze
from hangscope.model.serialize import load, to_dict

pytest.importorskip("torch")


def _conclusions(doc: dict) -> tuple:
    return doc["verdict"], doc["collectives"], doc["progress"]


def test_show_merge_and_reanalysis_of_a_saved_live_dump_agree_with_it(tmp_path: Path) -> None:
    with gloo_fr_job(tmp_path) as job:
        def dumped() -> str | None:
            out = run_cli("dump", str(job.launcher), "--format", "json", timeout=180)
            assert out.returncode == 0, out.stderr
            data = json.loads(out.stdout)
            # Under load a dump may catch a rank before it enters its collective (no group
            # yet): poll again, as for a dump without the Flight Recorder's conclusions.
            groups = data["collectives"]
            return out.stdout if groups and groups[0]["conclusions"] else None

        text = poll(dumped, "a dump that read both ranks' Flight Recorder", timeout=120,
                    interval=0.5)
    live = json.loads(text)
    saved = tmp_path / "live.json"
    saved.write_text(text)
    assert live["verdict"]["kind"] == "mismatched_collectives"
    assert live["progress"] is not None and live["progress"]["ranks"], "progress was watched"
    (reading,) = live["readings"]
    assert reading["flight_recorder"]["dumps"] and reading["progress"]["processes"]

    shown = run_cli("show", str(saved), "--format", "json", timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert _conclusions(json.loads(shown.stdout)) == _conclusions(live)

    merged = run_cli("merge", str(saved), "--format", "json", timeout=120)
    assert merged.returncode == 0, merged.stderr
    assert _conclusions(json.loads(merged.stdout)) == _conclusions(live)

    # The readings alone suffice: with the stored conclusions and their notes dropped, the
    # analysis reaches the same ones again.
    snap = load(saved)
    derived = {n for c in snap.collectives for n in c.notes}
    if snap.progress is not None and snap.progress.note:
        derived.add(snap.progress.note)
    bare = replace(snap, collectives=(), progress=None, verdict=None, groups=(), findings=(),
                   notes=tuple(n for n in snap.notes if n not in derived))
    again = to_dict(analyze(bare))
    assert _conclusions(again) == _conclusions(live)
    assert again["notes"] == live["notes"]
