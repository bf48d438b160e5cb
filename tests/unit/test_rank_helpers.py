"""A process below a rank that inherited its RANK is no rank (real blind-test recording).

tests/fixtures/roles/jit_gcc_cc1.dump.json: 4 ranks share a JIT-cache FileLock; rank 0 holds it
and runs gcc, whose cc1 inherited RANK=0. Discovery took cc1 for a second rank 0, and when cc1
exited during sampling the verdict read "Missing rank: rank 0 has exited".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.analyze.roles import refine_roles
from hangscope.model import Role, Severity
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
    assert again.verdict.kind.value == "lock_wait", again.verdict.summary
    holder = next(p for p in procs if p.role is Role.RANK and p.rank.global_rank == 0)
    assert again.verdict.suspects == (holder.pid,)
    assert "held by rank 0" in again.verdict.summary
    assert not [f for f in again.findings
                if f.id == "proc.exited" and f.severity is not Severity.INFO]
    exited = {f.evidence["pid"] for f in again.findings if f.id == "proc.exited"}
    assert cc1.pid in exited  # still said, as info: a compiler pass ends on its own
