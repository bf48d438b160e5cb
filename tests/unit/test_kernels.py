"""``dump --kernels``: cuda-gdb's ``info cuda kernels`` parsed from real H200 output, every
failure path with a real executable standing in for cuda-gdb, and the kernel in every format.

The captures (tests/fixtures/kernels/) are cuda-gdb 13.0 on one H200 (2026-12-01,
demo/gpu/live19.py): a spinning kernel behind ``.item()``, a Triton flag-spin kernel on every
SM, the long finite kernel, and an NCCL all_reduce waiting for its peer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import FIXTURES, poll

from hangscope.analyze import analyze
from hangscope.collect import cudagdb
from hangscope.collect.procfs import read_stat
from hangscope.model import kernels as ke
from hangscope.model.serialize import load, to_dict
from hangscope.render.markdown import render_markdown
from hangscope.render.text import gpu_cell

KERNELS = FIXTURES / "kernels"


def _parsed(name: str) -> tuple[ke.CudaKernel, ...]:
    return cudagdb.parse_kernels((KERNELS / f"{name}.cuda-gdb.txt").read_text())


def test_the_spinning_kernel_behind_item_is_named_with_its_grid_and_sm() -> None:
    (kernel,) = _parsed("item")
    assert (kernel.short, kernel.grid, kernel.block, kernel.sms, kernel.status, kernel.focus) \
        == ("spin_kernel", (1, 1, 1), (1, 1, 1), 1, "Active", True)
    assert kernel.name == "at::cuda::(anonymous namespace)::spin_kernel"
    assert kernel.collective is None


def test_a_triton_flag_spin_kernel_occupies_every_sm() -> None:
    (kernel,) = _parsed("triton_flag")
    assert (kernel.short, kernel.grid, kernel.block, kernel.sms) == (
        "wait_flag", (132, 1, 1), (128, 1, 1), 132)


def test_an_nccl_kernel_maps_to_its_collective() -> None:
    (kernel,) = _parsed("nccl_all_reduce")
    assert kernel.short == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    assert kernel.collective == "all_reduce"
    assert ke.kernel_text(kernel) == ("ncclDevKernel_AllReduce_Sum_f32_RING_LL (all_reduce), "
                                      "grid (2,1,1) block (288,1,1), 2 SMs")


@pytest.mark.parametrize(("name", "short"), [
    ("at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     "vectorized_elementwise_kernel"),
    ("ncclDevKernel_AllGather_RING_LL()", "ncclDevKernel_AllGather_RING_LL"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>(Params)", "Kernel2"),
])
def test_names_are_shortened_as_stacks_are(name: str, short: str) -> None:
    assert ke.shorten(name) == short.removeprefix("void ")


# --- failure paths: a real executable on PATH stands in for cuda-gdb, the target is real ---

@pytest.fixture
def target():
    """A real process to point cuda-gdb at (killed at the end, even on failure)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield proc.pid
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(timeout=30)


def _stand_in(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "bin" / "cuda-gdb"
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_no_cuda_gdb_gives_a_note_that_says_how_to_get_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HANGSCOPE_CUDA_GDB", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setattr(cudagdb, "Path", lambda *a: tmp_path.joinpath(*a[1:]) if a and a[0]
                        == "/usr/local" else Path(*a))
    assert cudagdb.find_cuda_gdb() is None
    read = cudagdb.read_many([os.getpid()])[os.getpid()]
    assert read.status == ke.NO_CUDA_GDB
    assert "cuda-gdb was not found" in (read.note or "")
    assert "HANGSCOPE_CUDA_GDB" in (read.note or "")


def test_a_stand_in_on_path_is_found_and_its_table_read(tmp_path: Path, monkeypatch,
                                                        target: int) -> None:
    gdb = _stand_in(tmp_path, f"cat '{KERNELS / 'nccl_all_reduce.cuda-gdb.txt'}'")
    monkeypatch.delenv("HANGSCOPE_CUDA_GDB", raising=False)
    monkeypatch.setenv("PATH", f"{gdb.parent}{os.pathsep}{os.environ['PATH']}")
    assert cudagdb.find_cuda_gdb() == str(gdb)
    read = cudagdb.read_many([target])[target]
    assert read.status == ke.READ and read.main is not None
    assert read.main.collective == "all_reduce"
    assert read.state_after not in ("T", "t") and not read.resumed


def test_a_refused_attach_says_why_and_what_to_do(tmp_path: Path, target: int) -> None:
    gdb = _stand_in(tmp_path, "echo 'ptrace: Operation not permitted.'; exit 1")
    read = cudagdb.read_kernels(target, str(gdb))
    assert read.status == ke.REFUSED
    assert "could not attach" in (read.note or "")
    assert "ptrace: Operation not permitted." in (read.note or "")
    assert "ptrace_scope" in (read.note or "")


def test_a_timeout_kills_cuda_gdb_and_never_leaves_the_rank_stopped(tmp_path: Path,
                                                                   target: int) -> None:
    # The stand-in stops the target (as a debugger's attach does) and never answers.
    marker = tmp_path / "gdb.pid"
    gdb = _stand_in(tmp_path, f'echo $$ > {marker}; kill -STOP "$4"; exec sleep 600')
    read = cudagdb.read_kernels(target, str(gdb), deadline_s=1.5)
    assert read.status == ke.TIMEOUT
    assert "did not answer" in (read.note or "") and "SIGCONT" in (read.note or "")
    assert read.resumed
    stat = poll(lambda: read_stat(target), "the target's stat")
    assert stat.state not in ("T", "t")
    gdb_pid = int(marker.read_text())
    poll(lambda: read_stat(gdb_pid) is None or read_stat(gdb_pid).state in "ZX",
         "the stand-in cuda-gdb to be gone")


def test_no_kernel_running_is_said_plainly(tmp_path: Path, target: int) -> None:
    gdb = _stand_in(tmp_path, "echo 'No CUDA kernels.'")
    read = cudagdb.read_kernels(target, str(gdb))
    assert read.status == ke.NO_KERNELS
    assert "no CUDA kernel running" in (read.note or "")


# --- the kernel in every format (real H200 dumps taken with --kernels) -------------------

@pytest.mark.parametrize(("name", "short"), [("item", "spin_kernel"),
                                             ("triton_flag", "wait_flag")])
def test_the_verdict_gpu_line_and_rank_table_name_the_kernel(name: str, short: str) -> None:
    snap = analyze(load(KERNELS / f"{name}.dump.json"))
    proc = next(p for p in snap.processes if p.kernels is not None)
    assert proc.kernels.status == ke.READ
    line = next(e for e in snap.verdict.evidence if "GPU 0 100% busy while" in e)
    assert f"the kernel running is {short}" in line and "(cuda-gdb)" in line
    assert gpu_cell(proc, snap).endswith(short)
    assert f"the kernel running is {short}" in render_markdown(snap)
    data = to_dict(snap)
    row = next(p for p in data["processes"] if p["pid"] == proc.pid)
    assert row["kernels"]["kernels"][0]["short"] == short
    assert json.loads(json.dumps(data))["processes"]  # JSON-able


def test_the_nccl_kernel_is_named_on_the_live_two_rank_job() -> None:
    snap = analyze(load(FIXTURES / "nccl/live_h200/behind-fr.dump.json"))
    rank0 = next(p for p in snap.processes if p.rank and p.rank.global_rank == 0)
    assert rank0.kernels is not None and rank0.kernels.main is not None
    assert rank0.kernels.main.collective == "all_reduce"
    # rank 1 shares the GPU but runs no kernel of its own: said so, not invented
    rank1 = next(p for p in snap.processes if p.rank and p.rank.global_rank == 1)
    assert rank1.kernels is not None and rank1.kernels.status == ke.NO_KERNELS


def test_without_kernels_a_spinning_gpu_says_kernels_would_name_it() -> None:
    snap = analyze(load(FIXTURES / "gpu/validation/sync.dump.json"))
    spinning = next(f for f in snap.findings if f.id == "gpu.spinning")
    assert "`hangscope dump --kernels` would name the kernel" in spinning.message


def test_the_finite_kernel_finished_after_its_inspection() -> None:
    summary = json.loads((KERNELS / "summary.json").read_text())
    finite = next(r for r in summary["kernels"] if r["mode"] == "finite")
    assert finite["finished"] is True and finite["rc"] == 0
    assert "RESULT 42.0" in (KERNELS / "finite.log").read_text()
    assert finite["dump"]["kernels"][0]["state_after"] not in ("T", "t")


def test_a_job_armed_for_user_triggered_gpu_core_dumps_is_told_how_and_never_dumped(
        tmp_path: Path) -> None:
    from support import run_cli

    ready = tmp_path / "ready"
    env = dict(os.environ, CUDA_ENABLE_USER_TRIGGERED_COREDUMP="1",
               CUDA_COREDUMP_PIPE=str(tmp_path / "corepipe.%p"))
    proc = subprocess.Popen([sys.executable, "-c", "import pathlib, sys, threading; "
                             "pathlib.Path(sys.argv[1]).write_text('1'); "
                             "threading.Event().wait()", str(ready)], env=env)
    try:
        poll(ready.exists, "the job to start")
        res = run_cli("dump", "--format", "json", "--samples", "2", "--window", "0.3",
                      "--no-progress", str(proc.pid), timeout=120)
        data = json.loads(res.stdout)
        found = next(f for f in data["findings"] if f["id"] == "gpu.coredump_pipe")
        pipe = str(tmp_path / f"corepipe.{proc.pid}")
        assert f"`echo 1 > {pipe}`" in found["message"]
        assert "hangscope never does it" in found["message"]
        assert not Path(pipe).exists()  # nothing was written or created
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_child_the_attach_leaves_as_a_zombie_is_named_in_the_note(tmp_path: Path) -> None:
    # The target forks a child that exits unreaped while "cuda-gdb" runs, as the CUDA
    # driver's NvDebugAgent did on the H200 (tests/fixtures/kernels/summary-run3.json).
    ready, go = tmp_path / "ready", tmp_path / "go"
    code = ("import os, pathlib, sys, time\n"
            "pathlib.Path(sys.argv[1]).write_text('1')\n"
            "while not pathlib.Path(sys.argv[2]).exists(): time.sleep(0.02)\n"
            "if os.fork() == 0: os._exit(0)\n"
            "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(ready), str(go)])
    try:
        poll(ready.exists, "the target")
        gdb = _stand_in(tmp_path, f"touch {go}; sleep 1; echo 'No CUDA kernels.'")
        read = cudagdb.read_kernels(proc.pid, str(gdb))
        assert len(read.left_zombies) == 1
        assert f"as a zombie child of PID {proc.pid}" in (read.note or "")
    finally:
        proc.kill()
        proc.wait(timeout=30)
