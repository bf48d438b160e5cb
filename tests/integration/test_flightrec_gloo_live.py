"""A real 2-rank gloo job hung in mismatched collectives: the Flight Recorder collector asks each
rank for a dump through its pipe, reads torch's real dumps, and the analysis names the mismatch
with both call sites."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fr_job import gloo_fr_job
from support import poll

from hangscope.analyze.evidence.collectives import analyze, live_ranks
from hangscope.collect import collectives, flightrec, procfs, ras
from hangscope.model import Process, RankInfo, Role
from hangscope.model import nccl as ev

pytest.importorskip("torch")


def _rank_process(pid: int) -> Process:
    env = procfs.read_environ(pid, keys=procfs.JOB_ENV_KEYS + flightrec.ENV_KEYS + ras.ENV_KEYS)
    return Process(pid=pid, python=True, role=Role.RANK,
                   rank=RankInfo(global_rank=int(env["RANK"])),
                   environ=env or {})


def test_gloo_mismatch_named_from_triggered_dumps(tmp_path: Path) -> None:
    started = time.time() - 1
    with gloo_fr_job(tmp_path) as job:
        pids = list(job.ranks)
        procs = [_rank_process(pid) for pid in pids]
        live = live_ranks(procs)
        assert live == {0: pids[0], 1: pids[1]}

        def mismatch() -> ev.CollectiveEvidence | None:
            ras_reading, fr_reading = collectives.collect(procs, job_start=started)
            found = analyze(ras_reading, fr_reading, live)
            return found if any(c.kind == ev.MISMATCH for c in found.conclusions) else None

        found = poll(mismatch, "a dump pair showing the mismatch", timeout=60, interval=0.5)
        (c,) = [c for c in found.conclusions if c.kind == ev.MISMATCH]
        assert c.seq == 2 and set(c.ops) == {"all_reduce", "all_gather"}
        assert {s.split(" ")[0] for s in c.sites} == {"rank_main"}
        assert set(c.ranks) == {0, 1} and set(c.pids) == set(pids)
        assert found.ras_status == ev.NO_NCCL  # a gloo job: nothing to ask RAS
        assert job.process.poll() is None  # the job is still there, untouched
