"""Blind round 38's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 38).

GIVEN an SGLang-shaped tokenizer, scheduler and detokenizer whose PUSH/PULL hops are all at
their high-water mark, the tokenizer sending its whole batch before reading THEN a deadlock of
the three, each waiting to send to the next, with the advice for full queues naming the
tokenizer, whose loops never read (it read a cycle of the scheduler and the detokenizer
"waiting for a reply" from each other, the scheduler the suspect; the dump re-taken with
``Frame.loop_receives``). GIVEN a trainer whose loader asked a curriculum service for the
next batch before reporting the losses that batch is built from THEN the service took the
trainer's message and holds it, the trainer the suspect (it read "the message ... was lost or
never sent").
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_three_stages_each_blocked_sending_to_the_next_then_a_ring_of_full_queues(
        ) -> None:
    snap = analyze(load(FIXTURES / "zmq_hwm_ring_three_stages.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    pids = {p.title.split()[0] if p.title else "": p.pid for p in snap.processes}
    stages = [snap.job.target, pids["sglang::scheduler"], pids["sglang::detokenizer"]]
    summary = verdict.summary
    for k, pid in enumerate(stages):
        hop = summary[summary.index(f"(PID {pid}) waits to send on Unix socket"):]
        assert f"(PID {stages[(k + 1) % 3]})" in hop.split(";")[0], (pid, summary)
    assert "a ring of full queues" in summary, summary
    assert "waits for a reply" not in summary, summary
    # the tokenizer's loops send and never read (Frame.loop_receives); the others' read too
    assert verdict.suspects[0] == snap.job.target, verdict
    assert (f"the launcher (PID {snap.job.target}), whose loop sends all its work before it "
            "reads, closes it") in summary, summary


def test_given_a_request_the_service_holds_for_the_trainers_report_then_it_is_not_lost(
        ) -> None:
    snap = analyze(load(FIXTURES / "zmq_request_parked_for_lookahead.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert verdict.suspects[0] == snap.job.target, verdict
    service = next(p.pid for p in snap.processes if "curriculum_service.py" in (p.title or ""))
    assert (f"PID {service} (python) took the message PID {snap.job.target} (python) sent "
            "last") in verdict.summary, verdict.summary
    assert "was lost" not in verdict.summary, verdict.summary
