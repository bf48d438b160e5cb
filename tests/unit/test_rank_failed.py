"""A failed rank leads the verdict (issue 19, item 3): real NCCL errors from live H200 jobs.

The dumps and job logs are in tests/fixtures/nccl/live_h200/ (demo/gpu/live19.py, two ranks
on one H200 with a NCCL_HOSTID each). The logs are read again through the log collector, as
a dump reads them, so its NCCL error lines are what the rule sees.
"""

from __future__ import annotations

from dataclasses import replace

from support import FIXTURES

from hangscope.analyze import analyze
from hangscope.analyze.evidence.facts import facts_of
from hangscope.analyze.rules.failed import rank_failed
from hangscope.collect.logs import read_tail
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

LIVE = FIXTURES / "nccl" / "live_h200"


def _with_logs(name: str):
    """The recorded dump, its ranks' log lines read again from the job's real log."""
    snap = load(LIVE / f"{name}.dump.json")
    tail = read_tail(str(LIVE / f"{name}.job.log"))
    assert tail is not None
    procs = tuple(replace(p, log_tail=tail.tail, log_errors=tail.errors) if p.log_files else p
                  for p in snap.processes)
    return analyze(replace(snap, processes=procs))


def test_fsdp2_size_mismatch_names_the_rank_the_cause_the_op_and_the_call_site() -> None:
    snap = _with_logs("fsdp2-fr")
    verdict = snap.verdict
    assert verdict.kind is VerdictKind.RANK_FAILED
    rank1 = next(p for p in snap.processes if p.rank and p.rank.global_rank == 1)
    assert verdict.summary.startswith(
        f"Rank 1 (PID {rank1.pid}) failed: NCCL invalid usage (sizes differ between ranks) in "
        "all_gather (#7) at fsdp2 (train_jobs.py:78)")
    assert "Meanwhile rank 0 waits" in verdict.summary  # who waits for it
    assert rank1.pid in verdict.suspects
    assert any("its watchdog: last enqueued #19, last completed #6" in e
               for e in verdict.evidence)


def test_ddp_and_lightning_failures_lead_with_the_failing_collective() -> None:
    ddp = _with_logs("ddp_uneven-fr").verdict
    assert ddp.kind is VerdictKind.RANK_FAILED
    # the failed all_reduce ran in DDP's backward hook (no user frame in its stack) and the
    # host has gone on to the barrier: no call site is claimed for it
    assert "failed: NCCL invalid usage (sizes differ between ranks) in all_reduce (#7). " \
           "Meanwhile rank 1" in ddp.summary
    light = _with_logs("lightning-fr").verdict
    assert light.kind is VerdictKind.RANK_FAILED
    assert "in broadcast (#19)" in light.summary


def test_a_killed_rank_leads_over_the_remote_error_it_caused() -> None:
    snap = _with_logs("dies-plain")
    verdict = snap.verdict
    dead = next(p for p in snap.processes if p.is_exited)
    assert verdict.summary.startswith(f"PID {dead.pid} was killed by SIGKILL; rank 0 ")
    assert "failed after it: NCCL remote error (a peer exited or the network failed) in " \
           "all_reduce (#2)" in verdict.summary
    assert verdict.suspects == (dead.pid,)


def test_no_failure_in_the_output_the_rule_does_not_hold() -> None:
    snap = _with_logs("behind-fr")
    assert rank_failed(facts_of(snap)) is None
    assert snap.verdict.kind is VerdictKind.STRAGGLER
