"""torch RPC calls followed across workers (analyze/graph/rpcedges.py, patterns/selfcalls.py
``unserved_call``), on real dumps.

GIVEN blind round 27's 05 (tests/fixtures/blind/rpc_batch_ps_uneven.dump.json: a batch-update
parameter server under ``@rpc.functions.async_execution``, its trainers given 6 and 5 batches;
the PS in ``wait_all`` on its trainers' loops, trainer1's RPC thread in its last ``rpc_sync``,
no RPC thread of any worker running a request) THEN a call no server runs, trainer1 the
suspect, the PS behind it (it read a wait chain ending at the PS's ``wait_all``). GIVEN the
same server with even trainers (tests/fixtures/frameworks/rpc_batch_even.dump.json), their
loops moving on their RPC threads while their main threads wait in ``rpc.shutdown`` THEN
progressing: the PS waits on trainers that work (it read a wait chain).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_given_a_batch_the_server_never_completes_then_a_call_no_server_runs() -> None:
    snap = analyze(load(FIXTURES / "blind" / "rpc_batch_ps_uneven.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    waiter = next(p for p in snap.processes
                  if any(t.name == "pt_thread_pool" and t.frames for t in p.threads))
    assert verdict.suspects == (waiter.pid,), verdict
    assert verdict.summary.startswith(
        f"A call no server runs: Thread pt_thread_pool of rank 0 (PID {waiter.pid}) waits in "
        "rpc_sync at run_trainer (launch.py:68)"), verdict.summary
    assert "waits on the reply to its RPC futures at wait_all" in verdict.summary
    edges = [e for e in snap.wait_graph.edges if e.kind == "rpc"] if snap.wait_graph else []
    assert [(e.to_pid, e.probable) for e in edges] == [(waiter.pid, True)], edges


def test_given_trainers_whose_loops_move_on_their_rpc_threads_then_progressing() -> None:
    snap = analyze(load(FIXTURES / "frameworks" / "rpc_batch_even.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING, verdict
    assert verdict.suspects == (), verdict
    trainers = [p for p in snap.ranks if p.working_thread is not None
                and p.working_thread.name == "pt_thread_pool"]
    assert len(trainers) == 2, [(p.pid, p.working_thread) for p in snap.ranks]
