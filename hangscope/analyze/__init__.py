"""Pure analysis over a Snapshot: classify threads, group ranks, decide the verdict, findings.

No I/O, no clock, no subprocess: ``analyze(snapshot)`` returns a new Snapshot.
"""

from __future__ import annotations

from dataclasses import replace

from hangscope.gcpause import collector_paused
from hangscope.model import Snapshot


def _without_collectives(snap: Snapshot) -> Snapshot:
    """A job outside torch.distributed, or one where no rank maps libnccl (gloo, CPU), has no
    collectives section and no NCCL RAS or Flight Recorder notes (issue 17 item 9, issue 20
    item 10): nothing of it could have answered them, and the advice to set
    TORCH_NCCL_DEBUG_INFO_PIPE_FILE does nothing without NCCL."""
    from hangscope.analyze.evidence.roots import job_in_distributed
    from hangscope.model.nccl import NO_NCCL, READ

    if not snap.collectives or any(c.communicators for c in snap.collectives):
        return snap
    # A Flight Recorder dump a gloo rank did write is evidence: it stays.
    without_nccl = all(c.ras_status == NO_NCCL and c.fr_status != READ and not c.conclusions
                       for c in snap.collectives)
    if job_in_distributed(snap.processes) and not without_nccl:
        return snap
    dropped = {n for c in snap.collectives for n in c.notes}
    return _replaced(snap, collectives=(), notes=tuple(n for n in snap.notes if n not in dropped))


#: What a Snapshot caches of its processes alone (model/__init__.py: ``cached``).
_OF_PROCESSES = ("subjects", "rank_processes", "by_role")


def _replaced(snap: Snapshot, **changes: object) -> Snapshot:
    """``replace``, keeping what ``snap`` cached of its processes where they stay the same:
    each is a scan of every process (131,072 ranks), and every stage would redo it."""
    new = replace(snap, **changes)  # type: ignore[arg-type]
    if new.processes is snap.processes:
        cached = snap.__dict__
        for name in _OF_PROCESSES:
            if name in cached:
                new.__dict__.setdefault(name, cached[name])
    return new


def analyze(snapshot: Snapshot) -> Snapshot:
    """Judge the raw readings (collectives, progress), classify every process, group the
    ranks, build the call tree, decide the verdict: every conclusion hangscope draws."""
    from hangscope.analyze.graph.stackindex import release

    with collector_paused():
        try:
            return _analyze(snapshot)
        finally:
            release()  # the index shared by the wait graph and the findings


def _analyze(snapshot: Snapshot) -> Snapshot:
    # Imported here: ``import hangscope.analyze`` stays cheap for the CLI's fast paths.
    from hangscope.analyze.evidence.classify import classify_process
    from hangscope.analyze.evidence.group import merged_call_tree
    from hangscope.analyze.evidence.roles import renumber_spawn_order, stack_roles
    from hangscope.analyze.evidence.roots import working_roots
    from hangscope.analyze.evidence.world import with_init_args
    from hangscope.analyze.findings.checks import find_all
    from hangscope.analyze.patterns.calm.calm import (
        calm_progress,
        fetching_loaders,
        waiting_on_work,
        waiting_progress,
    )
    from hangscope.analyze.patterns.waitpatterns import wait_graph
    from hangscope.analyze.readings import judge_readings
    from hangscope.analyze.verdict import diagnose, with_gpu_evidence

    snap = judge_readings(replace(snapshot, processes=working_roots(with_init_args(
        renumber_spawn_order(stack_roles(tuple(map(classify_process, snapshot.processes)))),
        snapshot.waits))))
    snap = _replaced(snap, wait_graph=wait_graph(snap))
    calmed = _replaced(snap, progress=calm_progress(snap))
    calmed = _replaced(calmed, progress=waiting_on_work(calmed))
    snap = _replaced(snap, progress=waiting_progress(calmed.progress, fetching_loaders(calmed)))
    snap = _without_collectives(snap)
    verdict, groups = diagnose(snap)
    verdict = with_gpu_evidence(verdict, snap.processes, snap.hosts)
    snap = _replaced(snap, groups=groups, verdict=verdict,
                     call_tree=merged_call_tree(snap.subjects))
    return _replaced(snap, findings=find_all(snap))
