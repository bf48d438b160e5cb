"""Roles on a real dump: torch.compile on CPU with Inductor's compile-worker pool.

tests/fixtures/roles/compile.dump.json is ``hangscope dump PID --format json`` of
``verdict_jobs.py compile`` (before refine_roles existed): its verdict lists the idle compile
workers as the blocked processes, and the compiling root is "launcher".
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze.evidence.classify import classify_process
from hangscope.analyze.evidence.compiling import compile_activity, describe_compile
from hangscope.analyze.evidence.roles import refine_roles
from hangscope.model import Role, subjects_of
from hangscope.model.serialize import load

DUMP = Path(__file__).parent.parent / "fixtures" / "roles" / "compile.dump.json"


def test_given_compiling_root_with_worker_pool_then_main_and_helpers() -> None:
    snap = load(DUMP)
    root = snap.processes[0]
    assert root.role is Role.LAUNCHER  # as discovery names it: a root with children
    assert "compile_worker" in (snap.verdict.summary if snap.verdict else "")
    # Classified again: the site skips torch/fx plumbing now (the dump said Interpreter.run).
    procs = refine_roles([classify_process(p) for p in snap.processes])
    assert [p.role for p in procs] == [Role.MAIN] + [Role.COMPILE_WORKER] * 3
    assert subjects_of(procs) == (procs[0],)
    (activity,) = compile_activity(procs)
    assert activity.workers == 2 and activity.busy_workers == 0
    assert activity.stage == "Inductor lowering"
    assert describe_compile(activity, procs) == (
        f"the main process (PID {root.pid}) compiles (Inductor lowering) for compile_rank "
        "(verdict_jobs.py:138); 0 of 2 compile workers busy")


def test_given_rank_with_children_that_are_ranks_then_launcher_stays() -> None:
    snap = load(Path(__file__).parent.parent / "fixtures" / "gpu" / "validation" /
                "nccl_init.dump.json")
    before = [p.role for p in snap.processes]
    assert [p.role for p in refine_roles(snap.processes)] == before
