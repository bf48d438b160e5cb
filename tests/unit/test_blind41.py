"""Blind round 41's jobs, as ``hangscope dump PID --format json`` saved them, read again
(tests/fixtures/blind/; docs/accuracy.md, round 41).

GIVEN a real vLLM ``AsyncLLM`` paused by its RL loop (``pause_generation(mode="keep")``) while
the loop's thread trains for ~24 s, then resumes (vllm#28037) THEN paused, not hung: the
engine's log says PAUSED_ALL, nothing outside the job waits on it, and the process that paused
it computes (it read "Wait chain: the worker waits for the engine core", a healthy job called
hung at every training step).

GIVEN two Accelerate ranks whose zmq DEALERs share one routing id (libzmq#4503: the sampler's
ROUTER drops the second), rank 1 waiting for its reply and rank 0 in DDP's first collective,
the sampler idle in ``poller.poll(1000)`` THEN rank 1 is the suspect: the sampler's timed poll,
caught as ``restart_syscall`` after py-spy's stop, waits for nobody (it read a deadlock of the
sampler and rank 1, the sampler the suspect).

GIVEN a FastAPI server whose sync endpoint drives one offline vLLM ``LLM`` from several AnyIO
threads (vllm#3248, vllm#1285: a thread takes another's outputs, the last waits for ever), its
client blocked reading the answer, the engine core idle for its next request THEN a reply
that never comes, the server the suspect, its thread in ``get_output`` named (the waiting
client, busy in its own pool's wait, hid it: the idle engine core was the suspect).

GIVEN an SGLang-shaped server whose scheduler holds a request too large for its KV pool at the
head of its queue (sglang#28530) and idles in its 50 ms poll, a client waiting on the front end
THEN hung, a reply that never comes: a scheduler whose lines move between polls on 0.5% of a
CPU works on nothing (it read "progressing: rank 0's Python line moved", a hung job called
healthy).

GIVEN a DataLoader worker started by the forkserver that re-runs the script's module-level
code and polls (filelock) the cache lock its parent holds while the parent writes the worker's
start-up data (nicegui#6166) THEN a deadlock whose suspect is the worker: the polled file
lock leads to its holder, the parent (/proc/locks; no "lock inherited locked across fork"),
whose write waits on the worker, and the worker's wait is inside multiprocessing's re-run of
its parent's script: the fix is the main guard (it read "a lock wait", the parent the suspect).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_an_engine_paused_while_its_rl_loop_trains_then_paused_not_hung() -> None:
    verdict = analyze(load(FIXTURES / "vllm_async_rl_paused_training.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.PAUSED, verdict
    assert verdict.suspects == (), verdict
    summary = verdict.summary
    assert summary.startswith("Paused, not hung: vllm's log says \"setting pause state to "
                              "PAUSED_ALL\""), summary
    assert "the launcher (PID 23838) computes on 68% of a CPU (thread asyncio_0 at " \
        "train_phase (job.py:41))" in summary, summary


def test_given_a_paused_engine_that_a_client_waits_on_then_still_never_resumed() -> None:
    """The twin: paused by a client that waits on it (the server idle): the pause is the hang."""
    verdict = analyze(load(FIXTURES / "vllm_paused_never_resumed.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.summary.startswith("Paused and never resumed"), verdict.summary


def test_given_a_timed_poll_caught_restarting_then_it_waits_for_nobody() -> None:
    snap = analyze(load(FIXTURES / "accelerate_zmq_duplicate_identity.dump.json"))
    verdict = snap.verdict
    assert verdict is not None and verdict.kind is not VerdictKind.DEADLOCK, verdict
    assert verdict.suspects == (25840,), verdict  # rank 1 (LOCAL_RANK=1 train.py)
    assert "rank 1 waits on another process (IPC) at SamplerClient._call (train.py:31)" \
        in verdict.summary, verdict.summary


def test_given_a_server_waiting_for_outputs_its_idle_engine_never_makes_then_the_server() -> None:
    verdict = analyze(load(FIXTURES / "vllm_llm_shared_by_fastapi_threads.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (22351,), verdict  # the FastAPI server holding the LLM
    summary = verdict.summary
    assert summary.startswith("A reply that never comes: The launcher (PID 22351) waits for "
                              "replies"), summary
    assert "its thread AnyIO worker thread waiting at SyncMPClient.get_output" in summary
    assert "the engine core (PID 22430) waits for new work" in summary, summary


def test_given_a_scheduler_polling_on_its_timer_with_a_client_waiting_then_hung() -> None:
    verdict = analyze(load(FIXTURES / "sglang_shaped_request_never_scheduled.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    summary = verdict.summary
    assert summary.startswith("A reply that never comes: The launcher (PID 23137) waits for "
                              "replies"), summary
    assert "rank 0 (PID 23240) and the detokenizer (PID 23241) wait for new work" in summary


def test_given_a_forked_child_polling_a_file_lock_then_a_cycle_through_its_rerun_script() -> None:
    verdict = analyze(load(FIXTURES / "forkserver_worker_polls_parents_filelock.dump.json")).verdict
    assert verdict is not None and verdict.kind is VerdictKind.DEADLOCK, verdict
    assert verdict.suspects == (24552,), verdict
    summary = verdict.summary
    assert "inherited locked across fork" not in summary, summary
    assert summary.startswith("Deadlock: PID 24552 (python) waits for the file lock on "
                              "/work/blind41/06_dataloader_pretokenize/cache/.cache.lock at "
                              "load_vocab (textcache.py:27), held by the launcher (PID 24394); "
                              "thread MainThread of the launcher (PID 24394) is blocked writing "
                              "pipe "), summary
    assert "is still running its parent's script again" in summary, summary
    assert 'if __name__ == "__main__":' in summary, summary
