"""Blind round 24's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 24).

GIVEN a real vLLM server whose logits processor runs a tool that asks the same server for a
completion from inside the step (vllm#13671), THEN a deadlock through the Worker, the API
server (its idle uvloop owes the tool's request a reply and awaits the EngineCore) and the
EngineCore (waiting for the Worker's step), the Worker's own call first and its suspect.
GIVEN an SGLang-shaped engine decoding a long request while its client waits, THEN
progressing: the waiting front end is no deadlock. GIVEN torchrun ranks whose group counts
drifted (a tracker made a group on rank 0 alone), rank 0 in the next new_group and rank 1 past
it, THEN rank 0 is the odd one.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

BLIND = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_tool_in_the_engine_calling_its_own_server_then_a_deadlock_worker_first() -> None:
    snap = analyze(load(BLIND / "vllm_tool_calls_its_server.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    worker = next(p.pid for p in snap.processes if p.title == "VLLM::Worker")
    engine = next(p.pid for p in snap.processes if p.title == "VLLM::EngineCore")
    assert verdict.suspects == (worker,), verdict
    summary = verdict.summary
    # the Worker's call, then the API server's loop awaiting the EngineCore, then its step
    assert summary.index("summarize (tool_logits.py:31)") < summary.index(
        f"from the engine core (PID {engine})") < summary.index("get_response"), summary
    assert "calls that same server" in summary, summary


def test_given_an_engine_decoding_a_long_request_then_progressing() -> None:
    snap = analyze(load(BLIND / "sglang_long_decode_busy.dump.json"))
    assert snap.verdict is not None and snap.verdict.kind is VerdictKind.PROGRESSING, snap.verdict


def test_given_a_group_made_on_rank_0_alone_then_rank_0_behind_in_new_group_is_odd() -> None:
    snap = analyze(load(BLIND / "new_group_rank0_drift.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.MISMATCHED_COLLECTIVES, verdict
    rank0 = next(p.pid for p in snap.ranks if p.rank is not None and p.rank.global_rank == 0)
    assert verdict.suspects == (rank0,), verdict
    assert "past line 58 where rank 0 made that call" in verdict.summary, verdict.summary
