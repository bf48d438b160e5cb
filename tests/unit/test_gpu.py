"""GPU facts next to each rank: evidence lines and findings from real H200 captures.

GIVEN a real capture (tests/fixtures/gpu) and the GPU readings NVML gives WHEN it is analysed
THEN the verdict's evidence puts the rank's GPU, utilisation and memory next to what its host
thread does, and says what that means. Live processes and real GPU hangs:
tests/integration/test_gpu_live.py.
"""

from __future__ import annotations

import json

import pytest
import support

from hangscope.analyze import analyze
from hangscope.analyze.evidence.classify import classify_thread
from hangscope.analyze.evidence.gpu import (
    compiler_children,
    gpu_evidence,
    gpu_findings,
    wait_point,
)
from hangscope.collect.pyspy import parse_dump
from hangscope.model import (
    Gpu,
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
from hangscope.words import size

FIXTURES = support.FIXTURES / "gpu"
REPO = support.REPO_ROOT
H200_TOTAL = 150_754_820_096  # what NVML reports for an H200's memory.total
MIB = 1 << 20


def capture_threads(case: str, kind: str = "native") -> list[Thread]:
    """Every thread of a capture as the sampler builds it: py-spy's, then /proc's native ones."""
    dump = parse_dump(1, (FIXTURES / f"{case}.{kind}.json").read_text(), native=kind == "native")
    assert dump.ok, dump.error
    proc_lines = []
    proc_file = FIXTURES / f"{case}.proc.txt"
    if proc_file.exists():
        for line in proc_file.read_text().splitlines():
            parts = line.split()
            if len(parts) < 4 or not parts[0].isdigit():
                break
            proc_lines.append(parts)
    tasks = {int(p[0]): p for p in proc_lines}
    threads = []
    for pt in dump.threads:
        task = tasks.pop(pt.tid, None)
        threads.append(Thread(tid=pt.tid, name=pt.name, active=pt.active, owns_gil=pt.owns_gil,
                              frames=pt.frames, state=task[2] if task else None,
                              wchan=(task[3] if task and task[3] != "0" else None)))
    threads += [Thread(tid=int(p[0]), name=p[1], state=p[2], wchan=p[3], python=False)
                for p in tasks.values()]
    return threads


def rank_process(case: str, pid: int = 1249, cpu: float = 0.0, used: int | None = 612 * MIB,
                 kind: str = "native", rank: int = 0) -> Process:
    threads = capture_threads(case, kind)
    return Process(pid=pid, ppid=1, role=Role.RANK, rank=RankInfo(global_rank=rank, source="env"),
                   state=threads[0].state or "S", cpu_percent=cpu, threads=tuple(threads),
                   python=True, gpus=(GpuProcessUse(0, used, "nvml"),))


def h200(samples: tuple[float, ...], used: int = 1_180 * MIB, health: tuple[str, ...] = ()) -> Gpu:
    return Gpu(index=0, name="NVIDIA H200", uuid="GPU-5c1d4b0e-6a38-2f4e-9b7d-0c2a7f1e8d31",
               utilization=sum(samples) / len(samples), utilization_samples=samples,
               memory_used=used, memory_total=H200_TOTAL, health=health)


def snapshot(procs: tuple[Process, ...], gpus: tuple[Gpu, ...] = (), samples: int = 3,
             error: str | None = None) -> Snapshot:
    host = Host(name="h200", cpus=16, gpus=gpus, gpu_error=error)
    return analyze(Snapshot(created="2026-11-29T00:00:00+00:00", hangscope="test", hosts=(host,),
                            job=Job(), processes=procs, samples=samples, window_s=2.0,
                            notes=(error,) if error else ()))


def gpu_lines(snap: Snapshot) -> list[str]:
    assert snap.verdict is not None
    return [line for line in snap.verdict.evidence if "): GPU " in line]


# --- where the host thread waits ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "kind", "point"),
    [
        ("sync", "native", "cudaDeviceSynchronize"),  # not the driver's cuCtxSynchronize_v2
        ("sync", "py", "synchronize (torch/cuda/__init__.py:1162)"),
        ("item", "native", "cudaLaunchKernel"),
        ("nccl_init", "native", "c10d::TCPStore::waitForWorkers"),
        ("capture", "native", "Condition.wait (threading.py:355)"),
        ("validation/pynccl", "native", "ncclCommInitRank"),
        ("validation/nccl_comm", "native", "ncclCommInitRankConfig"),
        ("validation/custom_ar", "native", "custom_all_reduce (cudaLaunchKernel)"),
    ],
)
def test_given_real_capture_when_wait_point_then_the_api_a_user_knows(
        case: str, kind: str, point: str) -> None:
    main = classify_thread(capture_threads(case, kind)[0])
    assert wait_point(main) == point


# --- evidence lines ---------------------------------------------------------------------------


def test_given_sync_spin_and_busy_gpu_then_kernel_spinning_line() -> None:
    # sync: the host spin-waits in cudaDeviceSynchronize at ~100% CPU; NVML: GPU 0 at 100%.
    snap = snapshot((rank_process("sync", cpu=99.0),), (h200((100.0, 100.0, 100.0)),))
    assert gpu_lines(snap) == [
        "rank 0 (PID 1249): GPU 0 100% busy while rank 0's host thread waits in "
        "cudaDeviceSynchronize: a kernel is spinning (NCCL or custom all-reduce waiting for a "
        "peer, or a long kernel); the host's 99% CPU is libcuda spin-waiting, not work "
        "[NVIDIA H200, rank 0 holds 612 MiB, memory 1.2 GiB of 140.4 GiB used]"
    ]
    spinning = [f for f in snap.findings if f.id == "gpu.spinning"]
    assert len(spinning) == 1
    assert spinning[0].message.startswith(
        "GPU 0 100% busy while rank 0's host thread waits in cudaDeviceSynchronize: a kernel "
        "is spinning")
    assert spinning[0].evidence["ranks"]["0"]["utilization_samples"] == [100.0, 100.0, 100.0]


def test_given_blocked_launch_and_busy_gpu_then_spinning_in_cuda_launch_kernel() -> None:
    snap = snapshot((rank_process("item", cpu=100.0),), (h200((100.0, 99.0, 100.0)),))
    (line,) = gpu_lines(snap)
    assert "GPU 0 100% busy while rank 0's host thread waits in cudaLaunchKernel: a kernel " \
           "is spinning" in line


def test_given_rendezvous_and_idle_gpu_then_block_is_upstream() -> None:
    snap = snapshot((rank_process("nccl_init", cpu=0.0),), (h200((0.0, 0.0, 0.0)),))
    (line,) = gpu_lines(snap)
    assert line.startswith("rank 0 (PID 1249): GPU 0 idle (0%) and rank 0's host thread waits "
                           "in c10d::TCPStore::waitForWorkers: nothing runs here, so the block "
                           "is upstream")
    assert [f.id for f in snap.findings if f.id.startswith("gpu.")] == ["gpu.idle"]


def test_given_triton_compile_with_ptxas_child_then_compiling_line_names_the_child() -> None:
    rank = rank_process("triton", pid=1253, cpu=0.0)
    ptxas = Process(pid=1300, ppid=1253, role=Role.COMPILER, state="S",
                    cmdline=("/opt/venv/lib/python3.12/site-packages/triton/backends/nvidia/bin/"
                             "ptxas", "-lineinfo", "-v", "--gpu-name", "sm_90a"))
    snap = snapshot((rank, ptxas), (h200((0.0, 0.0, 0.0)),))
    assert compiler_children(rank, snap.processes) == (snap.process(1300),)
    (line,) = gpu_lines(snap)
    assert line.startswith("rank 0 (PID 1253): GPU 0 idle (0%) while rank 0 compiles a kernel: "
                           "its compiler child ptxas (PID 1300) runs; the GPU waits for the "
                           "compiler")
    assert [f.id for f in snap.findings if f.id.startswith("gpu.")] == ["gpu.compiling"]


def test_given_many_spinning_ranks_then_one_finding_for_all() -> None:
    procs = tuple(rank_process("sync", pid=2000 + r, cpu=99.0, rank=r) for r in range(4))
    snap = snapshot(procs, (h200((100.0, 100.0)),))
    assert len(gpu_lines(snap)) == 4
    (spinning,) = [f for f in snap.findings if f.id == "gpu.spinning"]
    assert spinning.message == (
        "GPU 0 is busy while ranks 0-3 wait (cudaDeviceSynchronize): kernels are spinning "
        "(NCCL or custom all-reduce waiting for a peer, or a long kernel). `hangscope dump "
        "--kernels` would name the kernel (cuda-gdb; it pauses each such rank for seconds).")


def test_given_gpu_health_then_finding_and_evidence_say_it() -> None:
    gpu = h200((100.0,), health=("throttled: HW slowdown",))
    snap = snapshot((rank_process("sync", cpu=99.0),), (gpu,))
    assert "throttled: HW slowdown" in gpu_lines(snap)[0]
    assert any(f.id == "gpu.health" and "HW slowdown" in f.message for f in snap.findings)


def test_given_no_driver_then_no_gpu_lines_and_one_note() -> None:
    snap = snapshot((rank_process("sync", cpu=99.0, used=None),), (), error="no NVIDIA driver")
    assert gpu_lines(snap) == []
    assert not [f for f in snap.findings if f.id.startswith("gpu.")]
    assert snap.notes == ("no NVIDIA driver",)


def test_given_cuda_process_futex_threads_and_one_sample_then_no_local_deadlock() -> None:
    # Every CUDA process has ~15 native-only threads in futex_do_wait (capture.proc.txt);
    # with one sample they used to read as "16 threads wait on locks": a local deadlock.
    for case in ("capture", "sync"):
        snap = snapshot((rank_process(case),), (h200((0.0,)),), samples=1)
        assert snap.verdict is not None
        assert snap.verdict.kind is not VerdictKind.LOCAL_DEADLOCK, snap.verdict.summary


def test_format_bytes() -> None:
    assert size(None, iec=True) == "?"
    assert size(612 * MIB, iec=True) == "612 MiB"
    assert size(H200_TOTAL, iec=True) == "140.4 GiB"
    assert size(H200_TOTAL) == "140.4G"


def test_gpu_evidence_without_subjects_is_empty() -> None:
    assert gpu_evidence((), (), ()) == []
    assert gpu_findings(snapshot((), ())) == []


# --- the H200 validation run, re-read with today's code ---------------------------------------

VALIDATION = FIXTURES / "validation"


def _validation_cases() -> list[str]:
    from demo.gpu.validate import SCENARIOS

    return [s.name for s in SCENARIOS]


@pytest.mark.parametrize("name", _validation_cases())
def test_given_h200_dump_when_reanalysed_then_true_category_op_and_gpu_evidence(
        name: str) -> None:
    """Each ``hangscope dump --format json`` taken on the H200 (docs/gpu.md), analysed again."""
    from demo.gpu.validate import SCENARIOS, Result, check
    from hangscope.model.serialize import load, to_dict

    scenario = next(s for s in SCENARIOS if s.name == name)
    recorded = {r["name"]: r for r in json.loads((VALIDATION / "summary.json").read_text())
                ["results"]}[name]
    snap = analyze(load(VALIDATION / f"{name}.dump.json"))
    result = Result(name, scenario.description, scenario.required, {},
                    rank_pid=recorded["rank_pid"])
    check(result, to_dict(snap), scenario)
    failed = [c for c in result.checks if not c[1]]
    assert not failed, failed
    assert result.gpu is not None and result.gpu["name"] == "NVIDIA H200"
    assert result.gpu["used_memory"] and result.gpu["memory_total"] == H200_TOTAL
    # Who, which GPU and how busy ("rank 0 (PID 924)", "GPU 0 100% busy") is what the H200 run
    # said; the explanation after it may be reworded.
    def head(line: str) -> list[str]:
        who, gpu = line.split(": ", 2)[:2]
        return [who, gpu.split(" while ")[0].split(" and ")[0]]

    assert [head(e) for e in result.gpu_evidence] == [head(e) for e in recorded["gpu_evidence"]]


def test_given_h200_jit_dumps_then_ptxas_child_is_a_compiler_not_a_rank() -> None:
    from hangscope.model.serialize import load

    for name in ("triton", "capture_jit", "inductor"):
        snap = analyze(load(VALIDATION / f"{name}.dump.json"))
        ptxas = [p for p in snap.processes if p.cmdline and p.cmdline[0] == "ptxas"]
        assert ptxas, name
        assert all(p.role is Role.COMPILER for p in ptxas)
        ranks = [p for p in snap.processes if p.role is Role.RANK]
        assert len(ranks) == 1, [(p.pid, p.role, p.cmdline[:1]) for p in snap.processes]
        assert compiler_children(ranks[0], snap.processes) == tuple(ptxas)
