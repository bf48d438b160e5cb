"""Blind round 37's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 37).

GIVEN a Ray driver asking a plain actor for a count while the actor's run method loops for
ever THEN a call queued behind a method that loops, the actor the suspect (it read
"progressing": the loop's actors work). GIVEN an SGLang-shaped pipeline whose spawned children
made their own ipc names THEN a zmq socket connected to nothing, no two processes connected (it
read "idle": each bound endpoint read as a front waiting for its first client). GIVEN a client
reading an HTTP/1.1 body without a length until EOF while the server's handler reads the same
keep-alive connection, the server's answer a clock tick after the request THEN a deadlock (it
read "idle": no request open at an idle front end). GIVEN a DataLoader worker left waiting on
a queue whose one end marker its sibling took THEN the worker is the cycle's suspect (it named
the trainer, which waits through the DataLoader for that worker's batch).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_call_queued_behind_an_actor_poll_loop_then_the_actor_is_the_suspect() -> None:
    snap = analyze(load(FIXTURES / "ray_actor_poll_loop_queued_call.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    runner = next(p.pid for p in snap.processes if p.title == "ray::TaskExecutor.run")
    assert verdict.suspects == (runner,), verdict
    assert "to run get_num_executed_tasks, which it submitted, queued behind run" in \
        verdict.summary, verdict.summary


def test_given_a_pipeline_whose_processes_named_their_own_endpoints_then_connected_to_nothing(
) -> None:
    snap = analyze(load(FIXTURES / "zmq_ipc_names_made_per_process.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (snap.job.target,), verdict
    assert verdict.summary.startswith("A zmq socket connected to nothing: "), verdict.summary
    assert "no two processes of the job are connected" in verdict.summary, verdict.summary


def test_given_both_ends_of_a_keep_alive_connection_reading_it_then_a_deadlock() -> None:
    snap = analyze(load(FIXTURES / "http11_keepalive_no_length_server_last.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert "both wait to read the same connection, and neither sends" in verdict.summary


def test_given_a_loader_worker_waiting_on_its_dataset_queue_then_it_leads_the_cycle() -> None:
    snap = analyze(load(FIXTURES / "dataloader_one_sentinel_two_workers.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    worker = next(p.pid for p in snap.processes if p.role.value == "data_worker"
                  and not p.is_exited)
    assert verdict.suspects == (worker,), verdict
