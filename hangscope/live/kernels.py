"""``dump --kernels``: name the CUDA kernel on each stuck rank whose GPU spins.

The sampler calls :func:`with_kernels` on an analysed Snapshot: it picks the ranks whose GPU is
busy while their host waits and that nothing shows progressing (only those: cuda-gdb pauses a
rank for seconds), reads their kernels in parallel (collect/cudagdb.py), and analyses the
Snapshot again so the verdict's GPU line, the rank table and every format carry the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hangscope.analyze.evidence.gpu import GPU_BUSY_HOST_WAITING, rank_gpus
from hangscope.collect import cudagdb
from hangscope.model import Snapshot, VerdictKind


def stuck_spinning(snap: Snapshot) -> list[int]:
    """PIDs of the ranks already stuck with a spinning GPU: busy while the host thread waits
    (or GPM's "busy but no work"), the working thread unmoved, and no progress measured."""
    if snap.verdict is not None and snap.verdict.kind is VerdictKind.PROGRESSING:
        return []
    decided = {r.pid: r for r in (snap.progress.ranks if snap.progress else ())}
    out: list[int] = []
    for rg in rank_gpus(snap.subjects, snap.processes, snap.hosts):
        proc = rg.proc
        measured = decided.get(proc.pid)
        spins = rg.activity == GPU_BUSY_HOST_WAITING or (
            measured is not None and measured.gpu_state == "spin")
        working = proc.working_thread
        if (not spins or proc.is_exited or proc.state in ("D", "T", "t")
                or (measured is not None and measured.decision == "progressing")
                or (working is not None and working.samples > 1 and not working.stuck)):
            continue
        if proc.pid not in out:
            out.append(proc.pid)
    return out


def with_kernels(snap: Snapshot, raw: Snapshot, analyze: Callable[[Snapshot], Snapshot],
                 deadline_s: float = cudagdb.DEADLINE_S) -> Snapshot:
    """``snap`` (analysed) with each stuck spinning rank's kernels, analysed again from ``raw``
    (the same Snapshot before analysis). No such rank: a note says so and nothing is paused."""
    pids = stuck_spinning(snap)
    if not pids:
        return replace(snap, notes=(*snap.notes, "--kernels: no rank is stuck with a spinning "
                                    "GPU, so cuda-gdb paused nobody."))
    reads = cudagdb.read_many(pids, deadline_s)
    procs = tuple(replace(p, kernels=reads[p.pid]) if p.pid in reads else p
                  for p in raw.processes)
    # Said once for the job: no cuda-gdb at all; and what an attach left behind (its zombie)
    notes = sorted({r.note for r in reads.values()
                    if r.note and (r.status == "no_cuda_gdb" or r.left_zombies)})
    return analyze(replace(raw, processes=procs, notes=(*raw.notes, *notes)))
