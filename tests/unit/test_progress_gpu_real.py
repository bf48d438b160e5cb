"""The GPU rule of the progress decision on real H200 readings, and the verdict it leads to.

Fixtures (tests/fixtures/progress/gpu_*.json) are what ``demo/gpu/healthy.py`` recorded on one
NVIDIA H200 (the watcher run directly, before it was wired into the sampler): three healthy
workloads (bf16 matmul loop, MLP training loop, decode-like tiny kernels with ``.item()``) and
two hung ones (``torch.cuda._sleep`` for an hour; a Triton kernel on every SM polling a flag).
``gpu_readings.json`` holds the GPM metrics of all 10 windows of each.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
import support

from hangscope.analyze import analyze
from hangscope.analyze.evidence.progress import decide, gpu_work, progress_of
from hangscope.collect.pyspy import parse_dump
from hangscope.model import (
    GpuProcessUse,
    Host,
    Job,
    Process,
    RankInfo,
    Role,
    Snapshot,
    Thread,
    VerdictKind,
)
from hangscope.model.progress import GpmReading, ProgressEvidence
from hangscope.model.serialize import decode

FIXTURES = support.FIXTURES
HEALTHY = ("matmul", "train", "decode")
HUNG = ("spin", "spin_flag")


def recorded(name: str) -> tuple[ProgressEvidence, dict[str, Any]]:
    data = json.loads((FIXTURES / "progress" / f"gpu_{name}.json").read_text())
    return decode(ProgressEvidence, data), data


def readings() -> dict[str, Any]:
    return json.loads((FIXTURES / "progress" / "gpu_readings.json").read_text())["workloads"]


def gpm(run: dict[str, Any]) -> GpmReading:
    metrics = {k: v for k, v in run["gpm"][0].items() if k not in ("index", "error")}
    return GpmReading(index=run["gpm"][0]["index"], seconds=2.0, metrics=metrics)


@pytest.mark.parametrize("name", [*HEALTHY, *HUNG])
def test_given_real_h200_window_when_decided_then_as_on_the_device(name: str) -> None:
    evidence, data = recorded(name)
    got = decide(evidence.processes[0], evidence.seconds, evidence.gpus)
    assert got.decision == data["expected"]
    assert (got.decision, got.evidence, got.reason) == (
        data["decided_on_device"]["decision"], data["decided_on_device"]["evidence"],
        data["decided_on_device"]["reason"])


@pytest.mark.parametrize("name", ["matmul", "train"])
def test_given_real_matmul_or_training_gpm_then_its_kernels_do_work_in_all_10(name: str) -> None:
    for run in readings()[name]["runs"]:
        state, sentence = gpu_work(gpm(run))
        assert state == "work", sentence
        assert sentence.endswith("its kernels do work")


@pytest.mark.parametrize("name", HUNG)
def test_given_real_spinning_kernel_gpm_then_spin_in_all_10(name: str) -> None:
    # spin: graphics 100%, SM 0.76%; spin_flag: graphics 100% *and* SM 100% (every SM polls),
    # DRAM and math 0: SM activity alone would call the second one work.
    for run in readings()[name]["runs"]:
        assert run["utilization_gpu"] == [100.0]  # the classic counter cannot tell
        state, sentence = gpu_work(gpm(run))
        assert state == "spin", sentence
        assert "a spinning kernel, not work" in sentence


def test_given_real_decode_loop_gpm_then_neither_work_nor_spin_so_python_decides() -> None:
    for run in readings()["decode"]["runs"]:
        state, _ = gpu_work(gpm(run))
        assert state == "busy"  # graphics 22-32%, SM 0.2-0.3%: tiny kernels
        assert (run["decision"], run["evidence"]) == ("progressing", "python")


def test_given_matmul_window_decided_by_the_gpu_then_the_job_says_so() -> None:
    evidence, data = recorded("matmul_gpu_decided")
    pid = evidence.processes[0].pid
    job = progress_of(evidence, {pid: data["gpu_indices"]})
    assert job.decision == "progressing"
    rank = job.ranks[0]
    assert (rank.evidence, rank.gpu_state) == ("gpu", "work")
    assert rank.reason.startswith("GPU 0: SM activity 96%")
    assert job.note is None and job.seconds == evidence.seconds


# --- the verdict: a real rank stuck in cudaDeviceSynchronize on the H200 (tests/fixtures/gpu) ---

def sync_rank(pid: int) -> Process:
    """The real capture of a rank in torch.cuda.synchronize on the H200, as sampled."""
    dump = parse_dump(pid, (FIXTURES / "gpu" / "sync.native.json").read_text(), native=True)
    assert dump.ok, dump.error
    threads = tuple(Thread(tid=pid if i == 0 else t.tid, name=t.name, frames=t.frames, state="R",
                           samples=3, unchanged_samples=3)
                    for i, t in enumerate(dump.threads))
    return Process(pid=pid, ppid=1, role=Role.RANK, rank=RankInfo(global_rank=0, source="env"),
                   state="R", cpu_percent=99.0, threads=threads, python=True,
                   gpus=(GpuProcessUse(0, 612 << 20, "nvml"),))


def verdict_with(name: str | None) -> Snapshot:
    """The sync rank, with the progress measured in the real window ``name`` (None: none)."""
    progress = None
    pid = 1249
    if name is not None:
        evidence, data = recorded(name)
        evidence = replace(evidence, processes=(replace(evidence.processes[0], pid=pid,
                                                        threads=tuple(
            replace(t, tid=pid) if t.tid == evidence.processes[0].pid else t
            for t in evidence.processes[0].threads)),))
        progress = progress_of(evidence, {pid: data["gpu_indices"]})
    return analyze(Snapshot(created="2026-11-29T00:00:00+00:00", hangscope="test",
                            hosts=(Host(name="h200"),), job=Job(), processes=(sync_rank(pid),),
                            samples=3, window_s=2.0, progress=progress))


def test_given_sync_rank_and_spinning_gpu_then_all_waiting_with_advice_and_gpu_sentence() -> None:
    verdict = verdict_with("spin").verdict
    assert verdict is not None and verdict.kind is VerdictKind.ALL_WAITING
    assert "The GPU does not finish its work" in verdict.summary
    assert "GPU 0 is busy but does no work (SM activity 0.76%, graphics 100%" in verdict.summary
    assert any("stuck (GPU work, GPM): GPU 0 is busy but does no work" in line
               for line in verdict.evidence)


def test_given_sync_rank_and_working_gpu_then_progressing_by_the_gpu_not_all_waiting() -> None:
    # Every dump sample lands in cudaDeviceSynchronize; GPM says the kernels do work.
    verdict = verdict_with("matmul_gpu_decided").verdict
    assert verdict is not None and verdict.kind is VerdictKind.PROGRESSING
    assert verdict.summary.startswith("Progressing over 2.0 s: rank 0: its GPU's kernels do work")
    assert "does not finish" not in verdict.summary


def test_given_sync_rank_without_progress_evidence_then_the_old_verdict() -> None:
    verdict = verdict_with(None).verdict
    assert verdict is not None and verdict.kind is VerdictKind.ALL_WAITING
    assert "The GPU does not finish its work" in verdict.summary
    assert "GPM" not in " ".join(verdict.evidence)
