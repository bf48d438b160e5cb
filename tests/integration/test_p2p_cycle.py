"""Point-to-point on real gloo ranks (issue 11, item 4).

GIVEN 3 gloo ranks that each receive before they send WHEN hangscope dumps the job and reads
each p2p rank's peer (py-spy --locals) THEN every rank is in a p2p op (recv, not a group-wide
collective) and the wait-for graph is a cycle of ranks 0, 2, 1. GIVEN a healthy pipeline of
matched send/recv THEN the verdict is not a mismatch (nor a deadlock).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "targets"))

from verdict_support import dump_json, verdict_job

from hangscope.analyze.p2p import p2p_call_of_thread, p2p_graph
from hangscope.analyze.signatures import is_p2p
from hangscope.collect.pyspy import dump_locals
from hangscope.serialize import from_dict

RANKS = ["rank0", "rank1", "rank2"]


def test_given_receive_cycle_then_p2p_deadlock_with_its_ranks(tmp_path: Path) -> None:
    with verdict_job("p2p_cycle", tmp_path, RANKS, timeout=120) as job:
        snap = from_dict(json.loads(dump_json(job.launcher)))
        calls = {}
        for proc in snap.ranks:
            thread = proc.working_thread
            assert thread is not None and thread.category.value == "collective"
            assert thread.op == "recv" and is_p2p(thread.op), thread
            threads = dump_locals(proc.pid)
            assert threads is not None
            call = p2p_call_of_thread(threads, thread.tid)
            assert call is not None
            calls[proc.rank.global_rank] = call
    graph = p2p_graph(calls, sorted(calls))
    assert graph.cycles == ((0, 2, 1),)
    assert graph.matched == ()


def test_given_healthy_pipeline_then_not_a_mismatch(tmp_path: Path) -> None:
    with verdict_job("p2p_ok", tmp_path, RANKS, timeout=120) as job:
        snap = from_dict(json.loads(dump_json(job.launcher, "--samples", "5")))
    assert snap.verdict is not None
    assert snap.verdict.kind.value not in ("mismatched_collectives", "local_deadlock"), (
        snap.verdict)
    assert snap.verdict.kind.value == "progressing", snap.verdict
