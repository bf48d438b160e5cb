"""The wait-evidence verdicts on real recorded dumps (tests/fixtures/waits, record_waits.py).

GIVEN a real dump of a job of tests/targets/verdict_jobs.py, with the /proc/locks and the
py-spy --locals it read (``Snapshot.waits``), analysed again by the current analyzer, THEN this
verdict, these suspects, this sentence.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

from hangscope.analyze import analyze, rules
from hangscope.analyze.evidence.facts import facts_of
from hangscope.model import Role, Snapshot, VerdictKind
from hangscope.model.serialize import load
from hangscope.render.markdown import render_markdown

WAITS = Path(__file__).resolve().parent.parent / "fixtures" / "waits"


@cache
def dump(mode: str) -> Snapshot:
    return analyze(load(WAITS / f"{mode}.dump.json"))


def by_rank(snap: Snapshot) -> dict[int, int]:
    return {p.rank.global_rank: p.pid for p in snap.ranks if p.rank and p.rank.global_rank
            is not None}


def test_given_blocked_flock_waiters_then_lock_wait_names_holder_file_and_site() -> None:
    snap = dump("flock")
    ranks = by_rank(snap)
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.LOCK_WAIT
    assert snap.verdict.suspects == (ranks[0],)
    assert snap.verdict.summary.startswith(
        f"Lock wait: ranks 1-2 wait for the file lock on .../job-flock/.lock held by rank 0 "
        f"(PID {ranks[0]}), which sleeps at build_kernel (verdict_jobs.py:")
    assert snap.waits is not None and snap.waits.locals == ()  # flock blocks: no locals asked


def test_given_polling_filelock_waiters_then_their_locals_name_the_file() -> None:
    snap = dump("filelock")
    ranks = by_rank(snap)
    assert snap.waits is not None
    lock = snap.waits.lock_files()
    assert set(lock) == {ranks[1], ranks[2]} and len(set(lock.values())) == 1
    assert next(iter(lock.values())).endswith("/job-filelock/.lock")
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.LOCK_WAIT
    assert snap.verdict.suspects == (ranks[0],)
    assert "ranks 1-2 wait for the file lock on .../job-filelock/.lock held by rank 0" in (
        snap.verdict.summary)


def test_given_lock_evidence_missing_then_no_lock_verdict() -> None:
    # The same stacks without /proc/locks: the rule has nothing to name, so it does not hold.
    snap = analyze(replace(load(WAITS / "flock.dump.json"), waits=None))
    assert snap.verdict is not None and snap.verdict.kind is not VerdictKind.LOCK_WAIT


def test_given_receive_cycle_then_p2p_deadlock_among_its_ranks() -> None:
    snap = dump("p2p_cycle")
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.P2P_DEADLOCK
    assert snap.verdict.summary == (
        "Point-to-point deadlock among ranks 0, 2, 1: rank 0 waits to receive from rank 2; "
        "rank 2 waits to receive from rank 1; rank 1 waits to receive from rank 0 "
        "(every rank receives first and none sends).")
    assert sorted(snap.verdict.suspects) == sorted(by_rank(snap).values())


def test_given_p2p_waits_without_peers_then_never_every_rank_arrived() -> None:
    # Without --locals the cycle is not known, but every rank receiving and none sending is a
    # deadlock all the same; never "every rank arrived at the same collective", nor a mismatch.
    snap = analyze(replace(load(WAITS / "p2p_cycle.dump.json"), waits=None))
    assert snap.verdict is not None
    assert snap.verdict.kind is VerdictKind.P2P_DEADLOCK
    assert "Every rank waits at the same collective call" not in snap.verdict.summary
    assert snap.verdict.summary.startswith(
        "Point-to-point deadlock: every rank waits to receive"), snap.verdict.summary
    stalled = analyze(replace(load(WAITS / "p2p_stalled.dump.json"), waits=None))
    assert rules.mismatched_collectives(facts_of(stalled)) is None


def test_given_receiver_of_a_rank_elsewhere_then_that_rank_is_the_suspect() -> None:
    snap = dump("p2p_stalled")
    ranks = by_rank(snap)
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.STRAGGLER
    assert snap.verdict.summary.startswith(
        "Point-to-point wait: rank 1 waits to receive from rank 0, which is in sleep at "
        "build_kernel (verdict_jobs.py:")
    assert snap.verdict.suspects == (ranks[0],)


def test_given_unreaped_rank_then_missing_rank_with_exit_code_said_once() -> None:
    snap = dump("missing_unreaped")
    zombie = next(p for p in snap.processes if p.state == "Z")
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.MISSING_RANK
    assert snap.verdict.summary.startswith(
        "Missing rank: expected 4 ranks (WORLD_SIZE=4), found 0-2: rank 3 is missing "
        f"(PID {zombie.pid} exited with code 3, not reaped yet); ranks 0-2 wait in "
        "communicator init / rendezvous")
    assert snap.verdict.summary.count(f"PID {zombie.pid}") == 1
    assert snap.verdict.suspects == (zombie.pid,)


def test_given_torch_compile_then_compiling_with_helpers_never_suspects() -> None:
    snap = dump("compile")
    main = next(p for p in snap.processes if p.role is Role.MAIN)
    workers = [p for p in snap.processes if p.role is Role.COMPILE_WORKER]
    assert workers and snap.subjects == (main,)
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.COMPILING
    assert snap.verdict.summary.startswith(
        f"Compiling: the main process (PID {main.pid}) compiles (")
    pool = [w for w in workers if w.ppid != main.pid]  # the forked pool, not its sidecar
    assert len(pool) == 2 and "of 2 compile workers busy" in snap.verdict.summary
    assert snap.verdict.suspects == (main.pid,)


def test_given_a_helper_named_suspect_then_decide_drops_it() -> None:
    # Every rule's suspects pass through decide: a compile worker never stays one.
    facts = facts_of(dump("compile"))
    worker = next(p.pid for p in facts.processes if p.role is Role.COMPILE_WORKER)
    row = rules.Rule(VerdictKind.UNKNOWN, lambda f: replace(
        rules.unknown(f), suspects=(worker, facts.subjects[0].pid)), "test row")
    assert rules.decide(facts, (row,)).suspects == (facts.subjects[0].pid,)


def test_given_dp_replicas_then_mismatch_only_within_one_replica_by_label() -> None:
    # DP0's three ranks wait in a world all_reduce at another line: compared with DP1's ranks
    # they would make TP2 "rank 2" of both replicas; only DP1 disagrees inside itself.
    snap = dump("dp_tp_mismatch")
    odd = next(p for p in snap.processes if p.title == "sglang::scheduler_DP1_TP2")
    assert snap.verdict is not None
    assert snap.verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES
    assert snap.verdict.summary.startswith(
        "Mismatched collectives (in DP1): DP1·TP0, DP1·TP1 wait in all_reduce at "
        "dp_tp_mismatch (verdict_jobs.py:")
    assert snap.verdict.summary.endswith("The odd one out is DP1·TP2.")
    assert snap.verdict.suspects == (odd.pid,)
    assert [g.labels for g in snap.groups] == [
        ("DP0·TP0", "DP0·TP1", "DP0·TP2"), ("DP1·TP0", "DP1·TP1"), ("DP1·TP2",)]


def test_given_dp_replicas_then_the_report_groups_name_coordinates() -> None:
    snap = dump("dp_tp_mismatch")
    markdown = render_markdown(snap)
    assert "- **DP1·TP2**: collective `all_gather`" in markdown, markdown
    assert "- **DP0·TP0, DP0·TP1, DP0·TP2**: collective `all_reduce`" in markdown, markdown
