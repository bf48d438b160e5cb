"""A reply that never comes, on a recorded real dump (tests/frameworks/test_zmq_engine.py's
``misroute`` job, tests/targets/frameworks/zmq_engine.py): tokenizer worker 1 waits inside a
synchronous ``generate`` (``run_until_complete``) for an abort the detokenizer routed to
worker 0, which logged "received output for unknown rid tw1-1, dropping" (sglang#33858); the
schedulers, the detokenizer and worker 0 wait for new work. And the ``drop_reply`` job's
(lost_http_reply): the HTTP front end's handler awaits an output the detokenizer dropped
while a client outside the job blocks reading the connection the front end accepted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hangscope.analyze import analyze
from hangscope.model import Snapshot, VerdictKind
from hangscope.model.serialize import from_dict, load

DUMP = Path(__file__).resolve().parent.parent / "fixtures" / "frameworks" / \
    "lost_reply.dump.json"
HTTP = DUMP.parent / "lost_http_reply.dump.json"


def _snapshot(keep_log: bool = True) -> Snapshot:
    snap = from_dict(json.loads(DUMP.read_text()))
    if not keep_log:  # the same job whose log said nothing (or went elsewhere)
        snap = replace(snap, processes=tuple(replace(p, log_tail=()) for p in snap.processes))
    return analyze(snap)


def _pid(snap: Snapshot, title: str) -> int:
    return next(p.pid for p in snap.processes if p.title == title)


def test_the_worker_waiting_inside_generate_is_the_suspect_and_the_log_is_quoted() -> None:
    snap = _snapshot()
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.summary.startswith("A reply that never comes"), verdict.summary
    assert verdict.suspects == (_pid(snap, "sglang::tokenizer_worker_1"),), verdict
    assert "unknown rid tw1-1, dropping" in verdict.summary, verdict.summary
    scheduler = _pid(snap, "sglang::scheduler_TP0")
    assert f"rank 0 (PID {scheduler}) and the detokenizer" in verdict.summary, verdict.summary
    assert "wait for new work, not blocked" in verdict.summary, verdict.summary


def test_without_the_dropped_line_the_waiting_worker_is_still_the_suspect() -> None:
    snap = _snapshot(keep_log=False)
    verdict = snap.verdict
    assert verdict is not None and verdict.summary.startswith("A reply that never comes"), \
        verdict
    assert verdict.suspects == (_pid(snap, "sglang::tokenizer_worker_1"),), verdict
    assert "the log says" not in verdict.summary and "dropping" not in verdict.summary, \
        verdict.summary


def _http(keep_client: bool = True) -> tuple[Snapshot, int, int]:
    """The HTTP dump analysed (or without its client: the connection stays open, nobody
    reads it, as a keep-alive client's), the front end's PID and the client's."""
    snap = from_dict(json.loads(HTTP.read_text()))
    client = next(p.pid for p in snap.processes if p.cmdline[1:2] == ("-c",))
    front = snap.job.launcher
    assert front is not None and snap.waits is not None and snap.waits.kernel is not None
    if not keep_client:
        kernel = snap.waits.kernel
        kernel = replace(kernel, processes=tuple(f for f in kernel.processes if f.pid != client))
        snap = replace(snap, processes=tuple(p for p in snap.processes if p.pid != client),
                       waits=replace(snap.waits, kernel=kernel))
    return analyze(snap), front, client


def test_a_server_with_a_client_waiting_and_every_backend_idle_is_the_suspect() -> None:
    snap, front, client = _http()
    verdict = snap.verdict
    assert verdict is not None and verdict.summary.startswith("A reply that never comes"), \
        verdict
    assert verdict.suspects == (front,), verdict
    assert f"the request of PID {client} (blocked reading" in verdict.summary, verdict.summary
    assert "no decode state for rid 0, dropping" in verdict.summary, verdict.summary


def test_a_server_whose_open_connection_nobody_reads_holds_no_request_in_flight() -> None:
    snap, front, _ = _http(keep_client=False)
    assert snap.wait_graph is not None and snap.verdict is not None
    assert "lost_reply" not in {p.kind for p in snap.wait_graph.patterns}, snap.verdict
    assert front not in snap.verdict.suspects, snap.verdict


@pytest.mark.parametrize("name", ["vllm_engine_stopped_spin", "vllm_engine_stopped_yield",
                                  "vllm_engine_stopped_torn"])
def test_a_stopped_engine_core_whose_worker_spins_in_its_broadcast_wait_is_the_suspect(
        name: str) -> None:
    # The vllm tier's stopped EngineCore, recorded twice when its Worker had just had a
    # message: vLLM's broadcast wait spun (0.7 s of CPU in the window; 956 sched_yields and two
    # empty samples) at lines that change inside the wait. That is the wait, not work: the
    # EngineCore stays the suspect. "torn": a third capture (the tier of 2026-12-05 read it
    # progressing) whose window held --nonblocking samples torn outside the wait's outer
    # frames and one garbage sample.
    snap = analyze(load(Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"
                        / f"{name}.dump.json"))
    verdict = snap.verdict
    engine = next(p.pid for p in snap.processes if (p.title or "").startswith("VLLM::EngineCore"))
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (engine,), verdict


def test_an_offline_engine_whose_own_script_awaits_dropped_replies_is_a_lost_reply() -> None:
    # Blind round 16's 04 (sglang-jax#56): an SGLang-style offline engine (the script's own
    # process is the tokenizer: no title, no role) waits in Engine.generate for two requests
    # the scheduler finished at prefill and never sent on; scheduler and detokenizer idle.
    # First run: a chain through the zmq peers ending at the idle loop; now the lost reply,
    # by the call it waits in, whatever the process's role.
    snap = analyze(load(Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"
                        / "zmq_prefill_dropped.dump.json"))
    verdict = snap.verdict
    front = next(p.pid for p in snap.processes if "offline_batch.py" in " ".join(p.cmdline))
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (front,), verdict
    assert verdict.summary.startswith(f"A reply that never comes: PID {front} (python) waits "
                                      "for replies at Engine.generate (mini_engine.py:"), verdict
