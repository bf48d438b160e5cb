"""Point-to-point on real gloo ranks (issue 11, item 4).

GIVEN 3 gloo ranks that each receive before they send WHEN hangscope dumps the job and reads
each p2p rank's peer (py-spy --locals) THEN every rank is in a p2p op (recv, not a group-wide
collective) and the wait-for graph is a cycle of ranks 0, 2, 1. GIVEN a healthy pipeline of
matched send/recv THEN the verdict is not a mismatch (nor a deadlock).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import (
    VERDICT_JOBS,
    asleep,
    dump_json,
    poll,
    settled_dump,
    show_text,
    verdict_job,
)

from hangscope.analyze.evidence.p2p import (
    P2PCall,
    describe_points_at,
    p2p_call_of_thread,
    p2p_graph,
)
from hangscope.analyze.evidence.signatures import is_p2p
from hangscope.collect.pyspy import dump_locals
from hangscope.model import Snapshot
from hangscope.model.serialize import from_dict

RANKS = ["rank0", "rank1", "rank2"]


@pytest.mark.extended
def test_given_receive_cycle_then_p2p_deadlock_with_its_ranks(tmp_path: Path) -> None:
    with verdict_job("p2p_cycle", tmp_path, RANKS, timeout=120) as job:
        data = dump_json(job.launcher)
        snap = from_dict(json.loads(data))
        for proc in snap.ranks:
            thread = proc.working_thread
            assert thread is not None and thread.category.value == "collective"
            assert thread.op == "recv" and is_p2p(thread.op), thread
        calls = _peers(snap)
    graph = p2p_graph(calls, sorted(calls))
    assert graph.cycles == ((0, 2, 1),)
    assert graph.matched == ()
    # What the user sees: the dump itself names the deadlock, from the peers it read.
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "p2p_deadlock", verdict
    assert verdict.summary == (
        "Point-to-point deadlock among ranks 0, 2, 1: rank 0 waits to receive from rank 2; "
        "rank 2 waits to receive from rank 1; rank 1 waits to receive from rank 0 "
        "(every rank receives first and none sends).")
    assert sorted(verdict.suspects) == sorted(p.pid for p in snap.ranks)
    report = show_text(data, tmp_path)
    assert "P2P DEADLOCK" in report, report
    assert "Every rank waits at the same collective call" not in report, report


def _peers(snap: Snapshot) -> dict[int, P2PCall]:
    calls = {}
    for proc in snap.ranks:
        thread = proc.working_thread
        if thread is None or not is_p2p(thread.op):
            continue
        threads = dump_locals(proc.pid)
        assert threads is not None
        call = p2p_call_of_thread(threads, thread.tid)
        assert call is not None
        calls[proc.rank.global_rank] = call
    return calls


@pytest.mark.extended
def test_given_stage_that_never_sends_then_receivers_point_at_it(tmp_path: Path) -> None:
    with verdict_job("p2p_stalled", tmp_path, RANKS, timeout=120) as job:
        data = dump_json(job.launcher)
        snap = from_dict(json.loads(data))
        calls = _peers(snap)
    assert sorted(calls) == [1, 2]
    graph = p2p_graph(calls, [0, 1, 2])
    assert not graph.deadlocked and graph.points_at == (((1,), 0),)
    rank0 = next(p for p in snap.ranks if p.rank.global_rank == 0)
    where = f"in {rank0.working_thread.category} at {rank0.working_thread.site}"
    assert describe_points_at((1,), 0, calls, where).startswith(
        "rank 1 waits to receive from rank 0, which is in sleep at build_kernel (verdict_jobs.py:")
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "straggler", verdict
    assert verdict.summary.startswith(
        "Point-to-point wait: rank 1 waits to receive from rank 0, which is in sleep at "
        "build_kernel (verdict_jobs.py:"), verdict.summary
    assert verdict.suspects == (rank0.pid,)
    assert "Every rank waits at the same collective call" not in show_text(data, tmp_path)


@pytest.mark.extended
def test_given_healthy_pipeline_then_not_a_mismatch(tmp_path: Path) -> None:
    with verdict_job("p2p_ok", tmp_path, RANKS, timeout=120) as job:
        snap = from_dict(json.loads(dump_json(job.launcher, "--samples", "5")))
    assert snap.verdict is not None
    assert snap.verdict.kind.value not in ("mismatched_collectives", "local_deadlock"), (
        snap.verdict)
    assert snap.verdict.kind.value == "progressing", snap.verdict


@pytest.mark.extended
def test_given_async_ops_with_other_tags_then_the_unmatched_pair_is_named(
        tmp_path: Path) -> None:
    """GIVEN rank 2 isends to rank 1 with tag 7, rank 1 irecvs from 2 with tag 8 and rank 0
    irecvs from 1, each then in ``work.wait()`` WHEN dumped THEN the ops come from the native
    Work objects and the verdict names the unmatched pair 2-1, rank 0 behind them."""
    with verdict_job("p2p_async_tags", tmp_path, RANKS, timeout=120) as job:
        data = dump_json(job.launcher)
    snap = from_dict(json.loads(data))
    ops = {p.rank.global_rank: p.working_thread.op for p in snap.ranks}
    assert ops == {0: "recv", 1: "recv", 2: "send"}, ops
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "p2p_deadlock", verdict
    assert verdict.summary.startswith(
        "Unmatched point-to-point ops: rank 2 waits for a send to be received at "
        "gloo_rank (verdict_jobs.py:"), verdict.summary
    assert ("The pair to check is rank 2 and its neighbour rank 1; rank 0 waits behind them."
            in verdict.summary), verdict.summary
    by_rank = {p.rank.global_rank: p.pid for p in snap.ranks}
    assert verdict.suspects == (by_rank[2], by_rank[1])
    assert "mismatched" not in show_text(data, tmp_path).lower()


def test_given_every_rank_posts_async_receives_first_then_p2p_deadlock(tmp_path: Path) -> None:
    with verdict_job("p2p_async_recv", tmp_path, RANKS, timeout=120) as job:
        snap = from_dict(json.loads(dump_json(job.launcher)))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "p2p_deadlock", verdict
    assert verdict.summary.startswith(
        "Point-to-point deadlock: every rank waits to receive at gloo_rank (verdict_jobs.py:"), (
        verdict.summary)
    assert "none sends" in verdict.summary
    assert sorted(verdict.suspects) == sorted(p.pid for p in snap.ranks)


@pytest.mark.extended
def test_given_a_rank_that_skips_new_group_then_it_is_the_odd_one_out(tmp_path: Path) -> None:
    """Real reports: pytorch/pytorch#53395 and the c10d docs (new_group must be called by every
    process of the default group, even those not in the new group)."""
    with verdict_job("new_group_skip", tmp_path, RANKS, timeout=120) as job:
        snap = from_dict(json.loads(dump_json(job.launcher)))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "mismatched_collectives", verdict
    assert verdict.summary.startswith(
        "Mismatched collectives: ranks 0,2 wait in communicator init / rendezvous at "
        "gloo_rank (verdict_jobs.py:"), verdict.summary
    assert "rank 1 waits in barrier at gloo_rank" in verdict.summary, verdict.summary
    assert "every rank must call every new_group, in the same order" in verdict.summary
    rank1 = next(p.pid for p in snap.ranks if p.rank.global_rank == 1)
    assert verdict.suspects == (rank1,)
    ops = {p.rank.global_rank: p.working_thread.op for p in snap.ranks}
    assert ops == {0: "new_group", 1: "barrier", 2: "new_group"}, ops


def test_given_a_group_created_on_rank_0_alone_then_rank_0_is_the_odd_one_in_new_group(
        tmp_path: Path) -> None:
    """Real reports: pytorch/pytorch#134314 and #173608 (a group created on one rank only:
    the ranks' group counts drift; the rank that created one more waits in the next
    new_group, which its peer has passed)."""
    data, pids = settled_dump(VERDICT_JOBS, "new_group_drift", tmp_path, ["rank0", "rank1"])
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [pids["rank0"]], verdict
    assert "Rank 1 has passed the new_group that rank 0 waits in" in verdict["summary"], verdict
    assert "rank 0 created one group more before" in verdict["summary"], verdict


@pytest.mark.extended
def test_a_rank_receiving_from_any_source_while_the_others_sit_in_barrier_is_the_odd_one(
        tmp_path: Path) -> None:
    """Real report: lamia/llm-internal-medicine#45 (a gather of per-rank reports by recv from
    any source; one rank had nothing to report and went on to the barrier). The ranks' long
    process titles overwrote /proc/PID/environ: their RANK comes from the live environment."""
    data, pids = settled_dump(VERDICT_JOBS, "recv_any", tmp_path,
                              ["rank0", "rank1", "rank2", "rank3"])
    verdict = data["verdict"]
    assert verdict["kind"] == "mismatched_collectives", verdict
    assert verdict["suspects"] == [pids["rank0"]], verdict
    summary = verdict["summary"]
    assert summary.startswith("Mismatched: rank 0 waits in recv from any source at recv_any ("), \
        summary
    assert "ranks 1-3 wait in barrier at recv_any" in summary, summary
    assert "the message rank 0 waits for was never sent" in summary, summary


@pytest.mark.extended
def test_given_a_send_and_a_receive_with_other_tags_then_the_tags_are_said(
        tmp_path: Path) -> None:
    """gloo#308 (blind round 31's 01): rank 0 sends with tag 7, rank 1 waits to receive from
    it with tag 8; the verdict read "rank 0 sends and rank 1 receives", the tags unsaid."""
    with verdict_job("p2p_tags", tmp_path, ["rank0", "rank1"], timeout=120) as job:
        ranks = [job.pids["rank0"], job.pids["rank1"]]
        poll(lambda: all(asleep(r) for r in ranks), "both ranks blocked in send/recv", 60)
        snap = from_dict(json.loads(dump_json(job.launcher)))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "p2p_deadlock", verdict
    assert "rank 0 waits to send to rank 1 with tag 7; rank 1 waits to receive from rank 0 " \
        "with tag 8 (rank 0 sends with tag 7 and rank 1 receives with tag 8" in verdict.summary


@pytest.mark.extended
def test_given_ranks_broadcasting_from_different_roots_then_the_roots_are_said(
        tmp_path: Path) -> None:
    """Blind round 33's 05: each rank resumes from its own disk and broadcasts with itself as
    src; it read a wait chain from the launcher to rank 0, the roots unsaid."""
    with verdict_job("roots", tmp_path, ["rank0", "rank1"], timeout=120) as job:
        ranks = [job.pids["rank0"], job.pids["rank1"]]
        poll(lambda: all(asleep(r) for r in ranks), "both ranks blocked in broadcast", 60)
        snap = from_dict(json.loads(dump_json(job.launcher)))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind.value == "mismatched_collectives", verdict
    assert verdict.summary.startswith("Mismatched roots: ranks 0-1 wait in broadcast at "), (
        verdict.summary)
    assert "rank 0 names rank 0; rank 1 names rank 1" in verdict.summary, verdict.summary
    assert sorted(verdict.suspects) == sorted(ranks), verdict
