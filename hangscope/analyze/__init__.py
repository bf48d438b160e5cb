"""Pure analysis over a Snapshot: classify threads, group ranks, decide the verdict, findings.

No I/O, no clock, no subprocess: ``analyze(snapshot)`` returns a new Snapshot.
"""

from __future__ import annotations

from dataclasses import replace

from hangscope.model import Snapshot


def analyze(snapshot: Snapshot) -> Snapshot:
    """Classify every process, group the ranks, build the call tree, decide the verdict."""
    # Imported here: ``import hangscope.analyze`` stays cheap for the CLI's fast paths.
    from hangscope.analyze.classify import classify_process
    from hangscope.analyze.findings import find_all
    from hangscope.analyze.group import merged_call_tree
    from hangscope.analyze.roles import renumber_spawn_order
    from hangscope.analyze.verdict import diagnose, with_gpu_evidence
    from hangscope.analyze.waitpatterns import wait_graph

    snap = replace(snapshot, processes=renumber_spawn_order(
        tuple(map(classify_process, snapshot.processes))))
    snap = replace(snap, wait_graph=wait_graph(snap))
    verdict, groups = diagnose(snap)
    verdict = with_gpu_evidence(verdict, snap.processes, snap.hosts)
    snap = replace(snap, groups=groups, verdict=verdict,
                   call_tree=merged_call_tree(snap.subjects))
    return replace(snap, findings=find_all(snap))
