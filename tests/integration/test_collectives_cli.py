"""Through the real CLI, on a real 2-rank gloo job hung in mismatched collectives whose ranks
answer a Flight Recorder debug-info pipe (tests/targets/gloo_fr_mismatch.py): ``hangscope dump``
asks for the dumps, reads them, names the mismatch with both call sites, and shows the
Collectives section; ``--no-fr-trigger`` writes nothing for the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fr_job import gloo_fr_job
from support import poll, run_cli

pytest.importorskip("torch")


def test_dump_names_mismatched_collectives_from_the_flight_recorder(tmp_path: Path) -> None:
    with gloo_fr_job(tmp_path) as job:
        pid = str(job.launcher)
        # --no-fr-trigger: only dumps already on disk are read; none is asked for.
        quiet = run_cli("dump", pid, "--format", "json", "--samples", "1", "--no-fr-trigger",
                        timeout=120)
        assert quiet.returncode == 0, quiet.stderr
        assert not list(tmp_path.glob("nccl_trace_rank_*")), "--no-fr-trigger wrote dumps"
        # A gloo job with no Flight Recorder dump read: no collectives section, no NCCL notes
        # (issue 20: notes only where they apply).
        quiet_data = json.loads(quiet.stdout)
        assert quiet_data["collectives"] == []
        assert not any("NCCL" in n or "Flight Recorder" in n for n in quiet_data["notes"])

        # Each dump asks once; a rank busy elsewhere may answer after the collector's deadline,
        # and the next dump reads what it wrote.
        def dumped() -> dict | None:
            out = run_cli("dump", pid, "--format", "json", timeout=120)
            assert out.returncode == 0, out.stderr
            data = json.loads(out.stdout)
            # no Flight Recorder dump read yet: a gloo job has no collectives section then
            colls = data["collectives"]
            return data if colls and colls[0]["conclusions"] else None

        data = poll(dumped, "a dump that read both ranks' Flight Recorder", timeout=90,
                    interval=0.5)
        verdict = data["verdict"]
        assert verdict["kind"] == "mismatched_collectives"
        assert sorted(verdict["suspects"]) == sorted(job.ranks)
        (c,) = data["collectives"][0]["conclusions"]
        assert (c["kind"], c["seq"], sorted(c["ops"])) == ("mismatch", 2,
                                                           ["all_gather", "all_reduce"])
        for site in ("rank_main (gloo_fr_mismatch.py:49)", "rank_main (gloo_fr_mismatch.py:51)"):
            assert site in c["sites"] and site in verdict["summary"]
        assert any("Flight Recorder: dumps of ranks 0, 1 read from" in n for n in data["notes"])

        text = run_cli("dump", pid, "--samples", "1", timeout=120)
        assert text.returncode == 0, text.stderr
        assert "\nCollectives\n" in text.stdout
        # gloo's entries name their group (process_group ["0", "default_pg"]): the title says it.
        assert "process group 0 default_pg (Flight Recorder) · 2 ranks" in text.stdout
        assert "first disagreement at #2 (op)" in text.stdout
        assert job.process.poll() is None  # the job is still there, untouched
