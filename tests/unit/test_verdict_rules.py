"""Each verdict rule, GIVEN a real recorded snapshot, THEN this verdict and these suspects.

The snapshots are real dumps (tests/fixtures/snapshots: the bundled demos and the jobs of
tests/fixtures/record.py; tests/fixtures/gpu/validation: the H200 run), analysed again by the
current analyzer, so a change to classification or to a rule shows here first.
"""

from __future__ import annotations

import pytest
from support import reanalysed

from hangscope.analyze import rules
from hangscope.analyze.evidence.facts import Facts, facts_of
from hangscope.model import Job, Snapshot, VerdictKind


def suspects(snap: Snapshot) -> list[str]:
    """The suspects as a user reads them: ``rank 3`` or ``launcher``."""
    assert snap.verdict is not None
    out = []
    for pid in snap.verdict.suspects:
        proc = snap.process(pid)
        assert proc is not None, f"suspect PID {pid} is not a process of the snapshot"
        out.append(proc.name)
    return out


@pytest.mark.parametrize(("name", "kind", "who"), [
    ("mismatch", VerdictKind.MISMATCHED_COLLECTIVES, ["rank 3"]),
    ("sglang", VerdictKind.MISMATCHED_COLLECTIVES, ["rank 3"]),
    ("tie", VerdictKind.MISMATCHED_COLLECTIVES, ["rank 0", "rank 1"]),
    ("nccl_init", VerdictKind.MISSING_RANK, []),  # the launcher is never a default suspect
    ("pynccl", VerdictKind.MISSING_RANK, []),
    ("straggler", VerdictKind.STRAGGLER, ["rank 3"]),
    ("straggler-2", VerdictKind.STRAGGLER, ["rank 3"]),
    ("nccl_comm", VerdictKind.STRAGGLER, ["rank 1"]),
    ("deadlock", VerdictKind.LOCAL_DEADLOCK, ["other"]),
    ("sync", VerdictKind.ALL_WAITING, []),
    ("custom_ar", VerdictKind.ALL_WAITING, []),
    ("triton", VerdictKind.COMPILING, ["rank 0"]),
    ("progressing", VerdictKind.PROGRESSING, []),
    ("apart", VerdictKind.UNKNOWN, []),
])
def test_given_real_snapshot_then_verdict_and_suspects(name: str, kind: VerdictKind,
                                                       who: list[str]) -> None:
    snap = reanalysed(name)
    assert snap.verdict is not None
    assert (snap.verdict.kind, suspects(snap)) == (kind, who), snap.verdict.summary


def facts(name: str) -> Facts:
    return facts_of(reanalysed(name))


def test_mismatch_rule_names_the_smaller_group_odd_one_out() -> None:
    verdict = rules.mismatched_collectives(facts("mismatch"))
    assert verdict is not None
    assert verdict.summary.startswith(
        "Mismatched collectives: ranks 0-2 wait in all_reduce at sync_gradients (mismatch.py:57)"
        "; rank 3 waits in all_gather at gather_metrics (mismatch.py:68).")
    assert verdict.summary.endswith("The odd one out is rank 3.")


def test_tie_rule_says_no_majority_and_suspects_both_sides() -> None:
    """2 real gloo ranks, one in all_reduce and one in all_gather: no side is the odd one."""
    snap = reanalysed("tie")
    verdict = rules.mismatched_collectives(facts_of(snap))
    assert verdict is not None
    assert "The groups are the same size: no majority says which side is wrong." in (
        verdict.summary)
    assert "odd one out" not in verdict.summary
    assert sorted(verdict.suspects) == sorted(p.pid for p in snap.ranks)


def test_mismatch_rule_does_not_hold_for_one_collective_group() -> None:
    assert rules.mismatched_collectives(facts("straggler")) is None
    assert rules.mismatched_collectives(facts("custom_ar")) is None


def test_missing_rank_rule_says_expected_and_found() -> None:
    verdict = rules.missing_rank(facts("nccl_init"))
    assert verdict is not None
    assert verdict.summary.startswith("Missing rank: expected 2 ranks (")
    assert "found rank 0: rank 1 is missing (no process is left of it" in verdict.summary
    assert rules.missing_rank(facts("mismatch")) is None  # 4 of 4, none exited


def test_straggler_rule_names_the_busy_rank_and_the_waiters() -> None:
    verdict = rules.straggler(facts("straggler"))
    assert verdict is not None
    assert verdict.summary.startswith("Straggler: rank 3 runs on CPU at preprocess_batch")
    assert ", while ranks 0-2 wait in all_reduce at train_step" in verdict.summary
    assert rules.straggler(facts("mismatch")) is None  # nobody busy


def test_local_deadlock_rule_names_both_threads() -> None:
    verdict = rules.local_deadlock(facts("deadlock"))
    assert verdict is not None
    assert verdict.summary.startswith("Local deadlock in PID 8020: 2 threads wait on locks")
    assert len(verdict.evidence) == 2
    assert rules.local_deadlock(facts("mismatch")) is None


def test_all_waiting_rule_gives_the_advice_of_the_category() -> None:
    verdict = rules.all_waiting(facts("sync"))
    assert verdict is not None
    assert verdict.summary.startswith("All waiting: rank 0 waits for the GPU (CUDA sync)")
    assert "look at GPU utilisation" in verdict.summary
    assert rules.all_waiting(facts("mismatch")) is None  # two groups


def test_all_waiting_in_a_collective_does_not_claim_one_collective() -> None:
    """Ranks at one collective call may have passed it different groups or sizes (blind
    round 10's buckets over two groups): the advice says so, and where to read it."""
    verdict = rules.all_waiting(facts("custom_ar"))
    assert verdict is not None
    assert "Every rank waits at the same collective call" in verdict.summary
    assert "different process groups or sizes" in verdict.summary
    assert "TORCH_FR_BUFFER_SIZE" in verdict.summary


def test_progressing_rule_says_slow_not_hung() -> None:
    """A real process computing in turn in three functions: its stack moved in the window."""
    found = facts("progressing")
    assert found.moving, "the recorded process must have moved between samples"
    verdict = rules.progressing(found)
    assert verdict is not None
    assert verdict.summary.endswith("changed stack between samples: slow rather than hung.")
    assert any("stack moved" in line for line in verdict.evidence)
    assert rules.progressing(facts("mismatch")) is None  # nothing moved


def test_unknown_describes_every_group() -> None:
    verdict = rules.unknown(facts("apart"))
    # Two plain multiprocessing children (no rank: no env, title or process group) are named
    # by PID, not "rank 0"/"rank 1" by spawn order (issue 17 item 5: workers are no ranks).
    snap = reanalysed("apart")
    sleeper, reader = (next(p.pid for p in snap.processes if p.working_thread is not None
                            and p.working_thread.site and name in p.working_thread.site)
                       for name in ("nap", "read_reply"))
    assert verdict.summary == (
        f"Blocked: PID {sleeper} sleeps at nap (rule_jobs.py:58); PID {reader} waits on another "
        "process (IPC) at read_reply (rule_jobs.py:63).")


def test_no_target_when_nothing_could_be_read() -> None:
    empty = Snapshot(created="", hangscope="", hosts=(), job=Job(), processes=())
    verdict = rules.decide(facts_of(empty))
    assert verdict.kind is VerdictKind.NO_TARGET
    assert rules.no_target(facts("mismatch")) is None


def test_the_table_runs_in_the_documented_order() -> None:
    assert [rule.kind for rule in rules.RULES] == [
        VerdictKind.NO_TARGET, VerdictKind.PAUSED, VerdictKind.RANK_FAILED,
        VerdictKind.MISMATCHED_COLLECTIVES,
        VerdictKind.MISMATCHED_COLLECTIVES, VerdictKind.WAIT_CHAIN, VerdictKind.WAIT_CHAIN,
        VerdictKind.PROGRESSING, VerdictKind.MISMATCHED_COLLECTIVES,
        VerdictKind.MISMATCHED_COLLECTIVES, VerdictKind.MISSING_RANK,
        VerdictKind.MISSING_RANK,
        VerdictKind.P2P_DEADLOCK, VerdictKind.MISMATCHED_COLLECTIVES,
        VerdictKind.MISMATCHED_COLLECTIVES, VerdictKind.WAIT_CHAIN, VerdictKind.PROGRESSING,
        VerdictKind.WAIT_CHAIN, VerdictKind.WAIT_CHAIN, VerdictKind.WAIT_CHAIN,
        VerdictKind.DEADLOCK,
        VerdictKind.WAIT_CHAIN, VerdictKind.LOCAL_DEADLOCK,
        VerdictKind.WAIT_CHAIN, VerdictKind.LOCK_WAIT, VerdictKind.LOCAL_DEADLOCK,
        VerdictKind.STRAGGLER,
        VerdictKind.LOCK_WAIT, VerdictKind.COMPILING, VerdictKind.WAIT_CHAIN,
        VerdictKind.WAIT_CHAIN, VerdictKind.STRAGGLER, VerdictKind.P2P_DEADLOCK,
        VerdictKind.PROGRESSING, VerdictKind.STRAGGLER, VerdictKind.WAIT_CHAIN,
        VerdictKind.WAIT_CHAIN, VerdictKind.WAIT_CHAIN, VerdictKind.PAUSED,
        VerdictKind.PROGRESSING, VerdictKind.PROGRESSING, VerdictKind.PROGRESSING,
        VerdictKind.IDLE, VerdictKind.ALL_WAITING, VerdictKind.PROGRESSING]
    # collective evidence (NCCL RAS, Flight Recorder) before the stacks' rule of each kind
    assert [r.holds.__name__ for r in rules.RULES if r.holds.__name__.startswith("collective")] \
        == ["collective_mismatch", "collective_missing", "collective_behind"]


def test_first_rule_that_holds_wins() -> None:
    """A real straggler job also has stuck ranks in one collective group: the straggler rule
    comes first, so a table without it answers differently."""
    found = facts("straggler")
    assert rules.decide(found).kind is VerdictKind.STRAGGLER
    without = tuple(r for r in rules.RULES if r.kind is not VerdictKind.STRAGGLER)
    assert rules.decide(found, without).kind is not VerdictKind.STRAGGLER
