"""GPU facts on real processes: without a driver, dump and attach say so once; the validation
harness runs its CPU self-test; tests marked ``gpu`` start real GPU hangs (demo/gpu/validate.py)
and skip without a GPU. The pure GPU evidence tests are tests/unit/test_gpu.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import support

REPO = support.REPO_ROOT


# --- no driver: dump and attach work and say it once ------------------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _no_driver() -> None:
    from hangscope.collect.nvml import read_gpus

    if read_gpus().error is None:
        pytest.skip("this machine has a usable NVIDIA driver")


@pytest.mark.extended
def test_given_no_driver_when_dump_then_works_and_says_it_once(
        sleeper: subprocess.Popen[bytes], hangscope_cli) -> None:
    _no_driver()
    text = hangscope_cli("dump", str(sleeper.pid), "--samples", "1", env={"COLUMNS": "200"})
    assert text.returncode == 0, text.stderr
    assert text.stdout.count("no NVIDIA driver") == 1, text.stdout
    done = hangscope_cli("dump", str(sleeper.pid), "--samples", "2", "--window", "0.2",
                         "--format", "json")
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    assert snap["notes"].count("no NVIDIA driver") == 1
    assert snap["hosts"][0]["gpu_error"] == "no NVIDIA driver"
    assert done.stdout.count("no NVIDIA driver") == 2  # the note, and the host's field
    assert not any("GPU" in line for line in snap["verdict"]["evidence"])


def test_given_no_driver_when_attach_refreshes_then_note_stays_single(
        sleeper: subprocess.Popen[bytes]) -> None:
    _no_driver()
    from hangscope.live.sampler import SampleOptions, Sampler

    sampler = Sampler(sleeper.pid, SampleOptions(samples=2, window=0.2))  # what attach runs
    for _ in range(3):
        snap = sampler.snapshot()
        # Said once per snapshot, next to which py-spy read the stacks.
        assert snap.notes[0] == "no NVIDIA driver"
        assert [n for n in snap.notes if "NVIDIA" in n] == ["no NVIDIA driver"]
        assert snap.notes[1].startswith("py-spy ")


# --- the validation harness itself, and real GPU hangs ----------------------------------------


@pytest.mark.extended
def test_validation_harness_runs_its_cpu_self_test(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "demo" / "gpu" / "validate.py"), "--out",
                           str(tmp_path), "--only", "cpu_lock"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    (result,) = summary["results"]
    assert result["ok"] and result["category"] == "lock"
    assert (tmp_path / "captures.tar.gz").stat().st_size > 0


def _gpu_or_skip() -> None:
    from hangscope.collect.nvml import read_gpus

    reading = read_gpus()
    if reading.error is not None:
        pytest.skip(f"needs an NVIDIA GPU: {reading.error}")
    pytest.importorskip("torch")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sync", "nccl_init"])
def test_live_gpu_hang_is_read_right(name: str, tmp_path: Path) -> None:
    _gpu_or_skip()
    done = subprocess.run([sys.executable, str(REPO / "demo" / "gpu" / "validate.py"), "--out",
                           str(tmp_path), "--only", name], capture_output=True, text=True,
                          timeout=300, check=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    (result,) = summary["results"]
    assert result["ok"], done.stdout[-3000:]
