"""A process below a rank that inherited its RANK is no rank (real blind-test recording).

tests/fixtures/roles/jit_gcc_cc1.dump.json: 4 ranks share a JIT-cache FileLock; rank 0 holds it
and runs gcc, whose cc1 inherited RANK=0. Discovery took cc1 for a second rank 0, and when cc1
exited during sampling the verdict read "Missing rank: rank 0 has exited".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.evidence.roles import refine_roles
from hangscope.model import RankInfo, Role, Severity
from hangscope.model.serialize import load

DUMP = Path(__file__).parent.parent / "fixtures" / "roles" / "jit_gcc_cc1.dump.json"


def test_given_cc1_with_inherited_rank_then_it_is_rank_0s_compiler() -> None:
    snap = load(DUMP)
    cc1 = next(p for p in snap.processes if p.cmdline and p.cmdline[0].endswith("/cc1"))
    assert cc1.role is Role.RANK  # as the dump named it
    procs = refine_roles(snap.processes)
    assert next(p for p in procs if p.pid == cc1.pid).role is Role.COMPILER
    assert sorted(p.rank.global_rank for p in procs if p.role is Role.RANK) == [0, 1, 2, 3]

    again = analyze(replace(snap, processes=tuple(procs)))
    assert again.verdict is not None
    # (a lock held across a build that moves is waited for, slowly: no lock wait)
    assert again.verdict.kind.value == "progressing", again.verdict.summary
    holder = next(p for p in procs if p.role is Role.RANK and p.rank.global_rank == 0)
    assert f"for rank 0 (PID {holder.pid}), which works" in again.verdict.summary
    assert not [f for f in again.findings
                if f.id == "proc.exited" and f.severity is not Severity.INFO]
    exited = {f.evidence["pid"] for f in again.findings if f.id == "proc.exited"}
    assert cc1.pid in exited  # still said, as info: a compiler pass ends on its own


SHELL_CHILD = DUMP.parent / "setproctitle_shell_child.dump.json"


def test_given_a_rank_whose_shell_child_kept_the_environment_then_the_rank_stays_a_rank() -> None:
    """tests/fixtures/roles/setproctitle_shell_child.dump.json (blind round 9): 4 torchrun
    ranks set their titles (setproctitle wipes /proc/PID/environ, so discovery numbers them by
    spawn order); rank 1 runs ``sh -c "tail -F ... | grep"``, whose environment still says
    RANK=1 LOCAL_RANK=1. A process with a rank child that has the LOCAL_RANK it lacks is a
    launcher (torchrun's agent under srun) only when that child runs Python: the shell is
    rank 1's helper, and rank 1 stays rank 1."""
    snap = load(SHELL_CHILD)
    rank1 = next(p for p in snap.processes if p.cmdline == ("trainer_rank1",))
    shell = next(p for p in snap.processes if p.cmdline and p.cmdline[0] == "/bin/sh")
    # as discovery named it before the refinement (the dump keeps the refined, wrong role)
    before = [replace(p, role=Role.RANK, rank=RankInfo(global_rank=1, source="spawn-order"))
              if p.pid == rank1.pid else p for p in snap.processes]
    procs = {p.pid: p for p in refine_roles(before)}
    assert procs[rank1.pid].role is Role.RANK, procs[rank1.pid]
    assert procs[shell.pid].role is not Role.RANK, procs[shell.pid]
    assert sorted(p.rank.global_rank for p in procs.values() if p.role is Role.RANK) == [
        0, 1, 2, 3]


def test_given_a_node_launcher_under_the_jobs_launcher_then_it_is_a_launcher() -> None:
    """tests/fixtures/frameworks/deepspeed_zero3_uneven_eval.dump.json (discovery named it
    before this refinement): DeepSpeed's runner starts ``python -m deepspeed.launcher.launch``,
    not the root of the tree, which starts the ranks (LOCAL_RANK set): a launcher, not "other"."""
    snap = load(DUMP.parent.parent / "frameworks" / "deepspeed_zero3_uneven_eval.dump.json")
    node = next(p for p in snap.processes if "deepspeed.launcher.launch" in p.cmdline)
    assert node.role is Role.OTHER, node  # as the dump keeps it
    procs = {p.pid: p for p in refine_roles(list(snap.processes))}
    assert procs[node.pid].role is Role.LAUNCHER, procs[node.pid]
    assert sorted(p.rank.global_rank for p in procs.values() if p.role is Role.RANK
                  and p.rank is not None) == [0, 1]
