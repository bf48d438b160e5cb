"""torch.compile in progress on CPU: the compiling process is the main, its workers helpers.

GIVEN one process compiling a 160-layer model with Inductor (C++ built with g++ on CPU, ~40 s
here, a fresh TORCHINDUCTOR_CACHE_DIR) with Inductor's compile-worker pool started, WHEN
hangscope dumps it, THEN the compiling process is "main" in jit_compile at the user's call, and
the compile workers are helpers (issue 11 item 6: they were listed as the blocked processes and
the compiler was called "launcher").
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from support import dump_json, show_text, verdict_job

from hangscope.analyze.evidence.compiling import compile_activity, describe_compile
from hangscope.analyze.evidence.roles import is_helper_role, refine_roles
from hangscope.model import Category, Role, subjects_of
from hangscope.model.serialize import from_dict


def _pool_started(pid: int, timeout: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = [c for c in psutil.Process(pid).children(recursive=True)
                   if "compile_worker" in " ".join(c.cmdline()) and c.ppid() != pid]
        if len(workers) >= 2:
            return workers
        time.sleep(0.05)
    raise AssertionError("Inductor's compile workers did not start")


@pytest.mark.extended
def test_given_torch_compile_in_progress_then_main_compiles_and_workers_help(
        tmp_path: Path) -> None:
    with verdict_job("compile", tmp_path, ["compiling"], timeout=120) as job:
        _pool_started(job.launcher, 60)
        data = dump_json(job.launcher)
        snap = from_dict(json.loads(data))
        assert "compiled" not in job.ready_tags(), "the compile ended before the dump"
    procs = refine_roles(snap.processes)
    main = next(p for p in procs if p.pid == job.launcher)
    assert main.role is Role.MAIN
    thread = main.working_thread
    assert thread is not None and thread.category is Category.JIT_COMPILE
    assert thread.site is not None and thread.site.startswith("compile_rank (verdict_jobs.py:")
    workers = [p for p in procs if p.role is Role.COMPILE_WORKER]
    assert len(workers) >= 3  # the pool's sidecar and its 2 workers
    assert all(is_helper_role(p.role) for p in procs if p.pid != main.pid)
    assert subjects_of(procs) == (main,)
    (activity,) = compile_activity(procs)
    assert activity.pid == main.pid and activity.workers == 2
    text = describe_compile(activity, procs, now=time.time())
    assert text.startswith(f"the main process (PID {main.pid}) compiles ("), text
    assert "of 2 compile workers busy" in text
    # What the user sees: discovery itself calls it main, and the dump's verdict is compiling.
    dumped = {p.pid: p.role for p in snap.processes}
    assert dumped[main.pid] is Role.MAIN and all(
        is_helper_role(r) for pid, r in dumped.items() if pid != main.pid), dumped
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "compiling", verdict
    assert verdict.summary.startswith(f"Compiling: the main process (PID {main.pid}) compiles ("), (
        verdict.summary)
    assert "of 2 compile workers busy" in verdict.summary
    assert verdict.suspects == (main.pid,)
    report = show_text(data, tmp_path)
    assert "COMPILING" in report and "launcher" not in report.split("VERDICT")[0], report


def test_given_dataloader_workers_then_helpers_not_ranks(tmp_path: Path) -> None:
    # DataLoader workers are forked copies of the main process (same argv, same environment):
    # discovery numbered them as ranks by spawn order. torch names them pt_data_worker.
    with verdict_job("dataloader", tmp_path, ["worker0", "worker1"], timeout=120) as job:
        snap = from_dict(json.loads(dump_json(job.launcher)))
        workers = psutil.Process(job.launcher).children()
        comms = {c.pid: c.name() for c in workers}
    # The dump itself: the workers are helpers, main is the one subject; the workers are
    # suspects only as helpers blocked in the program's own code (the dataset's __getitem__,
    # waiting on an Event nobody sets), never as ranks.
    assert {p.pid for p in snap.processes if p.role is Role.DATA_WORKER} == {
        w.pid for w in workers}
    assert snap.verdict is not None and set(snap.verdict.suspects) <= {
        job.launcher, *(w.pid for w in workers)}
    assert "_StuckDataset.__getitem__" in snap.verdict.summary, snap.verdict.summary
    assert set(comms.values()) == {"pt_data_worker"}
    for procs in (refine_roles(snap.processes), refine_roles(snap.processes, comms)):
        roles = {p.pid: p.role for p in procs}
        assert all(roles[pid] is Role.DATA_WORKER for pid in comms), roles
        assert roles[job.launcher] is Role.MAIN
        assert [p.pid for p in subjects_of(procs)] == [job.launcher]
    # Before sampling (no stacks yet) the comm alone tells them apart.
    bare = [replace(p, threads=()) for p in snap.processes]
    assert {p.role for p in refine_roles(bare, comms) if p.pid in comms} == {Role.DATA_WORKER}
