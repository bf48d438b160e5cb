"""The conclusions drawn from the collectors' raw readings: collectives and progress.

The sampler records what NCCL RAS answered, the Flight Recorder dumps it read and what the
progress watcher saw (``Snapshot.readings``, one per node); this module alone judges them, in
``analyze(snapshot)``, so a live dump, ``show``, ``merge`` and the fixture regenerator reach the
same conclusions from the same readings. A snapshot without readings (an older dump) keeps the
conclusions it stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hangscope.analyze.evidence.collectives import node_evidence
from hangscope.analyze.evidence.facts import BUSY
from hangscope.analyze.evidence.flightrec.rank_evidence import with_collective_ranks
from hangscope.analyze.evidence.progress import merge_progress, progress_of
from hangscope.analyze.evidence.progress_hints import hints_of
from hangscope.frameworks.producers import in_task_loop_now
from hangscope.frameworks.torch_distributed import rpc_handler
from hangscope.model import Category, Process, Readings, Snapshot
from hangscope.model.nccl import CollectiveEvidence
from hangscope.model.progress import JobProgress
from hangscope.model.waits import KernelWaits


def _node_processes(snap: Snapshot, reading: Readings) -> Sequence[Process]:
    """The processes one node's readings are about (all of them on a one-node snapshot)."""
    if len(snap.readings) == 1:
        return snap.processes
    return [p for p in snap.processes if p.host == reading.host]


def _progress(reading: Readings, processes: Sequence[Process],
              kernel: KernelWaits | None = None) -> JobProgress | None:
    """Decide each watched process from the evidence, with the GPUs it uses and the syscalls
    its blocked threads are in (``kernel``)."""
    evidence = reading.progress
    if evidence is None:
        return None
    gpus_of = {p.pid: [g.gpu_index for g in p.gpus] for p in processes}
    progress = progress_of(evidence, gpus_of, _busy_workers(processes),
                           hints_of(processes, kernel))
    limit = evidence.record_limit
    recorded = any(p.sampled for p in evidence.processes)  # not on a live view's later tick
    if (limit is not None and recorded and len(evidence.processes) > limit
            and progress.note is None):
        progress = replace(progress, note=(
            f"Python lines recorded for {limit} of {len(evidence.processes)} processes (one "
            "recorder per core's worth); the others are judged by kernel counters and the GPU."))
    return progress


def _busy_workers(processes: Sequence[Process]) -> dict[int, int]:
    """PID -> the thread to judge where it is not the main thread: one that computes (a
    weight loader thread on CPU while the main thread waits for it), or a thread that runs a
    torch RPC request's function (a trainer's loop, the parameter server's request, while the
    main thread waits in ``rpc.shutdown``), or a sleeping working thread of a worker whose main
    thread waits in its framework's loop for its next task (a Ray Train worker's training
    thread pacing its steps: the main thread runs no task of its own, and the sleep's own
    thread says whether it ends and goes round). Elsewhere the main thread is judged: a
    server's select loop says more than a helper idle in Queue.get; a framework's own wait on
    the working thread (a report, a get) is read by the rules from the stacks."""
    out = {}
    for proc in processes:
        working = proc.working_thread
        if working is not None and working.tid != proc.pid and (
                working.category in BUSY or rpc_handler(working.frames)
                or (working.category is Category.SLEEP and in_task_loop_now(
                    next((t for t in proc.threads if t.tid == proc.pid), None)))):
            out[proc.pid] = working.tid
    return out


def _placed_ranks(snap: Snapshot) -> Snapshot:
    """A PID that RAS or the Flight Recorder places at a rank is that rank (mp.spawn ranks
    have no RANK in their environment), in every table, group and verdict, and in the
    collective analysis itself: judged before it."""
    processes = list(snap.processes)
    for reading in snap.readings:
        mine = [i for i, p in enumerate(processes)
                if len(snap.readings) == 1 or p.host == reading.host]
        placed = with_collective_ranks([processes[i] for i in mine], reading.ras,
                                       reading.flight_recorder)
        for i, proc in zip(mine, placed, strict=True):
            processes[i] = proc
    return replace(snap, processes=tuple(processes))


def judge_readings(snap: Snapshot) -> Snapshot:
    """``collectives`` and ``progress`` from ``snap.readings``, and the notes they carry
    (appended once, after the collectors' own: judging twice changes nothing)."""
    if not snap.readings:
        return snap
    snap = _placed_ranks(snap)
    collectives: list[CollectiveEvidence] = []
    progresses: list[JobProgress | None] = []
    for reading in snap.readings:
        processes = _node_processes(snap, reading)
        collectives.append(node_evidence(reading.ras, reading.flight_recorder, processes,
                                         reading.host))
        progresses.append(_progress(reading, processes, snap.waits.kernel if snap.waits else None))
    progress = (progresses[0] if len(progresses) == 1 else
                merge_progress(progresses, [p.pid for p in snap.processes]))
    notes = [n for c, p in zip(collectives, progresses, strict=True)
             for n in (*c.notes, p.note if p else None) if n]
    known = set(snap.notes)
    return replace(snap, collectives=tuple(collectives), progress=progress,
                   notes=(*snap.notes, *(n for n in notes if n not in known)))
