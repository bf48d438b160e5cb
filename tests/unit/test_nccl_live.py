"""Every live NCCL scenario of issue 19 (item 1), read by ``hangscope dump`` on one H200 with two
ranks on one GPU (``NCCL_HOSTID`` per rank): the verdict, its suspects and what it names.

Recorded by demo/gpu/live19.py (2026-12-01; tests/fixtures/nccl/live_h200/, docs/gpu.md);
each dump is analysed again by today's code. Two plain (RAS-only) runs read wrong there and
are left out of this table on purpose, with the reason in docs/gpu.md: ``single-plain`` and
``subgroup-plain`` were given another concurrent job's communicator by RAS.
"""

from __future__ import annotations

import pytest
from support import FIXTURES

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

LIVE = FIXTURES / "nccl" / "live_h200"

# scenario-variant: (verdict, suspect global ranks (None: a process whose rank is unknown),
# what the summary must name)
EXPECTED = {
    "behind-plain": (VerdictKind.STRAGGLER, [1], "rank 1 has not reached it (NCCL RAS)"),
    "behind-fr": (VerdictKind.STRAGGLER, [1], "rank 1 has not reached collective #2 "
                  "(all_reduce at rank_main (nccl_jobs.py:169))"),
    "extra_op-plain": (VerdictKind.STRAGGLER, [0], "rank 1 launched AllGather #1"),
    "extra_op-fr": (VerdictKind.MISMATCHED_COLLECTIVES, [0, 1],
                    "rank 0 called all_reduce at rank_main (nccl_jobs.py:175); rank 1 called "
                    "all_gather at rank_main (nccl_jobs.py:174)"),
    "wrong_op-plain": (VerdictKind.MISMATCHED_COLLECTIVES, [0, 1],
                       "rank 0 launched AllReduce #2; rank 1 launched AllGather #1"),
    "wrong_op-fr": (VerdictKind.MISMATCHED_COLLECTIVES, [0, 1],
                    "rank 0 called all_reduce at rank_main (nccl_jobs.py:180); rank 1 called "
                    "all_gather at rank_main (nccl_jobs.py:182)"),
    "subgroup-fr": (VerdictKind.STRAGGLER, [1], "Process group 1 (undefined): rank 1 enqueued "
                    "collectives up to #1"),
    "single-fr": (VerdictKind.ALL_WAITING, [], "rank 0 waits for the GPU (CUDA sync)"),
    "size_mismatch-fr": (VerdictKind.MISMATCHED_COLLECTIVES, [0, 1],
                         "rank 0 called all_gather of [[262144]] Float at rank_main "
                         "(nccl_jobs.py:125); rank 1 called all_gather of [[16384]] Float"),
    # without the Flight Recorder nothing recorded the sizes, and both ranks did go on to
    # block in queue.get: what the stacks say is the truth of that run
    "size_mismatch-plain": (VerdictKind.ALL_WAITING, [], "ranks 0-1 wait on a lock at "
                            "_block_forever"),
    "dies-plain": (VerdictKind.RANK_FAILED, [None], "was killed by SIGKILL; rank 0"),
    "dies-fr": (VerdictKind.RANK_FAILED, [None], "failed after it: NCCL remote error"),
    "capture-plain": (VerdictKind.STRAGGLER, [1], "inside CUDA graph capture"),
    "capture-fr": (VerdictKind.STRAGGLER, [1], "inside CUDA graph capture"),
    "ddp_uneven-fr": (VerdictKind.RANK_FAILED, [0], "failed: NCCL invalid usage in all_reduce "
                      "(#7). Meanwhile rank 1 waits"),
    "fsdp2-fr": (VerdictKind.RANK_FAILED, [1], "failed: NCCL invalid usage in all_gather (#7)"),
    "lightning-fr": (VerdictKind.RANK_FAILED, [0], "failed: NCCL invalid usage in broadcast "
                     "(#19)"),
    # A third run (the same day) with today's log collector, and the two RAS-only runs that
    # read wrong beside three other jobs, run alone
    "single-plain-alone": (VerdictKind.ALL_WAITING, [], "rank 0 waits for the GPU (CUDA sync)"),
    "subgroup-plain-alone": (VerdictKind.STRAGGLER, [1], "rank 1 has not reached it (NCCL RAS)"),
    "fsdp2-fr-run3": (VerdictKind.RANK_FAILED, [1], "Rank 1 (PID 1100) failed: NCCL invalid "
                      "usage (sizes differ between ranks) in all_gather (#10). Meanwhile rank 0"),
    "ddp_uneven-fr-run3": (VerdictKind.RANK_FAILED, [0], "failed: NCCL invalid usage (sizes "
                           "differ between ranks) in all_reduce (#8)"),
    "lightning-fr-run3": (VerdictKind.RANK_FAILED, [0], "failed: NCCL invalid usage (sizes "
                          "differ between ranks) in broadcast (#17) at lightning "
                          "(train_jobs.py:119)"),
    "dies-plain-run3": (VerdictKind.RANK_FAILED, [None], "was killed by SIGKILL; rank 0 (PID "
                        "775) failed after it: NCCL remote error (a peer exited or the network "
                        "failed) in all_reduce (#2) at rank_main (nccl_jobs.py:139)"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_live_scenario_verdict(name: str) -> None:
    kind, ranks, said = EXPECTED[name]
    snap = analyze(load(LIVE / f"{name}.dump.json"))
    verdict = snap.verdict
    rank_of = {p.pid: (p.rank.global_rank if p.rank else None) for p in snap.processes}
    assert verdict.kind is kind, verdict.summary
    assert sorted((rank_of[pid] for pid in verdict.suspects), key=str) == ranks
    assert said in verdict.summary


def test_every_recorded_scenario_is_in_the_table_or_named_as_wrong() -> None:
    recorded = {p.name.removesuffix(".dump.json") for p in LIVE.glob("*.dump.json")}
    assert recorded - set(EXPECTED) == {"single-plain", "subgroup-plain"}
