"""A vLLM Worker dumped within a second of its last message (CI of 2026-12-06, vllm tier).

GIVEN the EngineCore stopped (SIGSTOP) while a client's requests flowed, dumped at once: the
Worker's broadcast wait still spun (``sched_yield``) in round one, then slept in its zmq poll
for the whole window, waking once (vLLM's ``SpinCondition``: it spins for a second after each
read, then polls). THEN the change between rounds is one wait changing mode, not progress: the
stopped EngineCore is the suspect. A real capture (vllm_engine_stopped_yield) with its
Worker's window replaced by what the CI's run measured: 174 samples in ``Poller.poll``, one
wake-up, 2% of a core.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hangscope.analyze import analyze
from hangscope.model import Role, Snapshot, VerdictKind
from hangscope.model.progress import CounterDelta, ProcessProgress, ThreadProgress
from hangscope.model.serialize import load

DUMP = (Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"
        / "vllm_engine_stopped_yield.dump.json")


def _polled(thread: ThreadProgress, counters: CounterDelta) -> ThreadProgress:
    """The thread's window as one stack, its zmq poll's, over 174 samples."""
    poll = next(s for s in thread.stacks if s.frames and "Poller.poll" in s.frames[-1])
    return replace(thread, samples=174, stacks=(replace(poll, count=174),), counters=counters)


def _with_window(snap: Snapshot, pid: int, voluntary: int) -> Snapshot:
    def process(pp: ProcessProgress) -> ProcessProgress:
        if pp.pid != pid:
            return pp
        return replace(pp, threads=tuple(
            _polled(t, replace(t.counters, cpu_ns=40_000_000, runs=voluntary + 1,
                               voluntary=voluntary, involuntary=1))
            if t.tid == pid and t.counters is not None else t for t in pp.threads))

    readings = tuple(r if r.progress is None else replace(r, progress=replace(
        r.progress, processes=tuple(process(p) for p in r.progress.processes)))
        for r in snap.readings)
    return replace(snap, readings=readings, verdict=None)


def test_a_worker_whose_wait_went_from_spin_to_poll_between_rounds_leaves_the_engine_suspect(
        ) -> None:
    snap = load(DUMP)
    worker = next(p for p in snap.processes if p.role is Role.RANK)
    engine = next(p.pid for p in snap.processes if (p.title or "").startswith("VLLM::EngineCore"))
    main = next(t for t in worker.threads if t.tid == worker.pid)
    # The rounds saw the stack change: sched_yield in round one, the poll after.
    assert main.frames[0].name == "sched_yield" and not main.stuck
    verdict = analyze(_with_window(snap, worker.pid, voluntary=1)).verdict
    assert verdict is not None and verdict.kind is VerdictKind.WAIT_CHAIN, verdict
    assert verdict.suspects == (engine,), verdict
    assert "is stopped (state T)" in verdict.summary, verdict.summary
