"""A child is "forked without exec" on the kernel's word where it has one: the stack address.

tests/fixtures/waitgraph/fork_lock.dump.json is a real child forked by its launcher that waits
on a lock inherited locked (recorded before stack addresses were read: the command line, the
same as its parent's, says fork). Lightning starts rank 1 as the script's own command line
again, a fresh interpreter: same argv, its stack elsewhere (ASLR). A CI run under load called
that rank's lock wait "a lock inherited locked across fork".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.serialize import load

FORK_LOCK = Path(__file__).resolve().parent.parent / "fixtures" / "waitgraph" / \
    "fork_lock.dump.json"


def _with_stacks(parent_at: int | None, child_at: int | None) -> Snapshot:
    snap = load(FORK_LOCK)
    parent = next(p for p in snap.processes if p.ppid not in {q.pid for q in snap.processes})
    return replace(snap, processes=tuple(
        replace(p, stack_start=parent_at if p.pid == parent.pid else child_at)
        for p in snap.processes))


def test_the_same_stack_address_or_none_read_says_fork() -> None:
    for snap in (_with_stacks(0x7FFC0000, 0x7FFC0000), _with_stacks(None, None)):
        verdict = analyze(snap).verdict
        assert verdict is not None and "inherited locked across fork" in verdict.summary


def test_a_child_with_its_parents_command_line_but_its_own_stack_was_execd() -> None:
    verdict = analyze(_with_stacks(0x7FFC0000, 0x7FFD1000)).verdict
    assert verdict is not None and "inherited locked across fork" not in verdict.summary
    assert verdict.kind is not VerdictKind.PROGRESSING, verdict
