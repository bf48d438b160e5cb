"""A read of a multiprocessing queue's pipe leads to the feeder thread that holds its data
(tests/fixtures/frameworks/uvicorn_import_pool_cycle.dump.json: ``uvicorn --workers 2`` on
tests/targets/frameworks/uvicorn_import_pool.py, python/cpython#155890, blind round 41's 04).

GIVEN a uvicorn worker whose app module, at import, maps on a ProcessPoolExecutor: its main
thread holds the module's import lock while it waits for the map's result (a hand-off from the
executor's manager thread, which waits on the pool process), the pool process reads its call
queue, and the queue's feeder thread, pickling the task by reference, waits for that import
lock THEN a deadlock through the import lock whose suspect is the worker alone: the pool
process's read leads to the feeder (it led to the worker's main thread, and the chain read
"event loop blocked in a synchronous wait"), a ring shortened through the manager's own
wake-up pipe is no shorter way round, and a pool worker idle in its task loop shares no blame.
"""

from __future__ import annotations

from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import VerdictKind
from hangscope.model.serialize import load

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks" / \
    "uvicorn_import_pool_cycle.dump.json"


def test_a_pool_reading_its_call_queue_waits_on_the_feeder_holding_its_task() -> None:
    snap = analyze(load(FIXTURE))
    assert snap.wait_graph is not None
    (read,) = [e for e in snap.wait_graph.edges if e.pid == 18471 and e.to_pid == 18464]
    assert read.to_tid == 18473 and read.probable, read  # the QueueFeederThread
    verdict = snap.verdict
    assert verdict.kind is VerdictKind.DEADLOCK, verdict
    assert verdict.suspects == (18464,), verdict
    assert "thread QueueFeederThread of PID 18464 (python) waits for the import lock of " \
        "uvicorn_import_pool.py" in verdict.summary, verdict.summary
    assert "a module's body waits for a thread that needs that same module" in verdict.summary
