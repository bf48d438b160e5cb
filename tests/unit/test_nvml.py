"""The NVML collector and the GPU activity evidence.

Without a GPU (CI, this machine) the tests check the real no-driver path and the pure helpers.
Tests marked ``gpu`` need a real NVIDIA GPU; they skip, saying why, when NVML is unusable.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pynvml
import pytest
import support

from hangscope.analyze.evidence.gpu import (
    ACTIVITY_KINDS,
    GPU_BUSY,
    GPU_BUSY_HOST_WAITING,
    GPU_BUSY_MIN_PERCENT,
    GPU_IDLE,
    GPU_IDLE_HOST_IDLE,
    GPU_IDLE_MAX_PERCENT,
    describe_activity,
    gpu_activity,
)
from hangscope.collect import nvml
from hangscope.collect.nvml import (
    GpuReading,
    _DeviceGone,
    _env_gpu_index,
    _gpu_fd_counts,
    _gpu_indices_from_fd_targets,
    _nvml_call,
    _Unusable,
    _uses_from_fd_targets,
    _visible_devices,
    gpus_of_process,
    merge_readings,
    read_gpus,
)
from hangscope.model import Gpu, GpuProcessUse

FIXTURES = support.FIXTURES / "gpu"  # the H200 captures (as in ../shared/fixtures/gpu)
_FD_LINE = re.compile(r"^\s+(\d+) (\S.*)$")

H200_UUIDS = (
    "GPU-5c1d4b0e-6a38-2f4e-9b7d-0c2a7f1e8d31",
    "GPU-a0f3c9d2-17b4-4e65-8c21-3f9d0b6e4a57",
)


def _fd_sections() -> dict[str, str]:
    """case -> the ``count target`` lines of each captured ``*.proc.txt``."""
    files = sorted(FIXTURES.glob("*.proc.txt"))
    assert files, f"no captures in {FIXTURES}"
    sections = {}
    for path in files:
        lines = [line for line in path.read_text().splitlines() if _FD_LINE.match(line)]
        sections[path.name.removesuffix(".proc.txt")] = "\n".join(lines)
    return sections


def _targets(section: str, device: int = 0) -> list[str]:
    """Real-looking readlink targets from a fixture section: "N" becomes a number again."""
    targets: list[str] = []
    for line in section.splitlines():
        match = _FD_LINE.match(line)
        assert match, line
        count, target = int(match.group(1)), match.group(2)
        target = re.sub(r"^/dev/nvidiaN$", f"/dev/nvidia{device}", target)
        target = target.replace("nvidia-capN", "nvidia-cap1").replace("[N]", "[48213]")
        target = "7" if target == "N" else target
        targets.extend([target] * count)
    return targets


def _h200(index: int, util: float | None, used: int, **kw: object) -> Gpu:
    return Gpu(
        index=index,
        name="NVIDIA H200",
        uuid=H200_UUIDS[index],
        pci_bus=f"00000000:{0x19 + index:02X}:00.0",
        utilization=util,
        utilization_samples=(util,) if util is not None else (),
        memory_used=used,
        memory_total=150_754_820_096,
        temperature=38,
        power_w=118.5,
        sm_clock_mhz=1980,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


# --- read_gpus on this machine -------------------------------------------------------------


def test_read_gpus_without_gpu_records_reason() -> None:
    reading = read_gpus()
    if reading.error is None:
        assert reading.gpus, "a usable NVML must see GPUs"
        return
    assert reading.error in (nvml.NO_DRIVER, nvml.NO_GPU)
    assert reading.gpus == ()
    assert reading.per_pid == {}


@pytest.mark.quiet  # a time is the assertion: run alone
def test_read_gpus_twice_is_cheap_and_consistent() -> None:
    first = read_gpus()
    start = time.perf_counter()
    second = read_gpus()
    elapsed = time.perf_counter() - start
    assert second.error == first.error
    assert [g.index for g in second.gpus] == [g.index for g in first.gpus]
    if first.error is not None:
        assert second == first
        assert elapsed < 0.05  # the failed init is remembered, not retried


# --- the chokepoint, with real pynvml errors ----------------------------------------------


def test_error_values_match_pynvml() -> None:
    assert nvml._ERR_NOT_SUPPORTED == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert nvml._ERR_NO_PERMISSION == pynvml.NVML_ERROR_NO_PERMISSION
    assert nvml._ERR_DRIVER_NOT_LOADED == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    assert nvml._ERR_LIBRARY_NOT_FOUND == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert nvml._ERR_GPU_IS_LOST == pynvml.NVML_ERROR_GPU_IS_LOST
    assert nvml._ERR_RESET_REQUIRED == pynvml.NVML_ERROR_RESET_REQUIRED
    assert nvml._ERR_LIB_RM_VERSION_MISMATCH == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    assert nvml._ERR_UNINITIALIZED == pynvml.NVML_ERROR_UNINITIALIZED
    assert nvml._ERR_GPU_NOT_FOUND == pynvml.NVML_ERROR_GPU_NOT_FOUND
    assert nvml._TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert nvml._CLOCK_SM == pynvml.NVML_CLOCK_SM
    assert nvml._MEMORY_ERROR_UNCORRECTED == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    assert nvml._VOLATILE_ECC == pynvml.NVML_VOLATILE_ECC
    assert dict(nvml._THROTTLE_REASONS) == {
        pynvml.nvmlClocksEventReasonHwSlowdown: "HW slowdown",
        pynvml.nvmlClocksEventReasonHwThermalSlowdown: "HW thermal slowdown",
        pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown: "HW power brake slowdown",
        pynvml.nvmlClocksEventReasonSwThermalSlowdown: "SW thermal slowdown",
    }


# pynvml's own _nvmlCheckReturn raises the real NVMLError subclass for a return code.
def test_not_supported_field_is_none() -> None:
    assert _nvml_call("_nvmlCheckReturn", pynvml.NVML_ERROR_NOT_SUPPORTED) is None


def test_one_field_without_permission_is_none() -> None:
    assert _nvml_call("_nvmlCheckReturn", pynvml.NVML_ERROR_NO_PERMISSION) is None


def test_missing_function_is_none() -> None:
    assert _nvml_call("nvmlDeviceGetSomethingThatDoesNotExist") is None


def test_success_returns_value() -> None:
    assert _nvml_call("_nvmlCheckReturn", pynvml.NVML_SUCCESS) == pynvml.NVML_SUCCESS


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no NVIDIA driver"),
        (pynvml.NVML_ERROR_GPU_NOT_FOUND, "no NVIDIA GPU"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, nvml.VERSION_MISMATCH),
    ],
)
def test_unusable_nvml_anywhere_is_a_reason(code: int, reason: str) -> None:
    with pytest.raises(_Unusable) as info:
        _nvml_call("_nvmlCheckReturn", code)
    assert info.value.reason == reason


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission to read NVML"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no NVIDIA driver"),
        (pynvml.NVML_ERROR_TIMEOUT, "NVML unusable: NVMLError_Timeout"),
    ],
)
def test_required_call_failure_is_a_reason(code: int, reason: str) -> None:
    with pytest.raises(_Unusable) as info:
        _nvml_call("_nvmlCheckReturn", code, required=True)
    assert info.value.reason == reason


def test_lost_gpu_is_reported_for_that_gpu() -> None:
    with pytest.raises(_DeviceGone) as info:
        _nvml_call("_nvmlCheckReturn", pynvml.NVML_ERROR_GPU_IS_LOST)
    assert "GPU is lost" in info.value.reason


# --- fd targets -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(_fd_sections()))
def test_fd_targets_from_real_capture(case: str) -> None:
    section = _fd_sections()[case]
    assert _gpu_indices_from_fd_targets(_targets(section, device=0)) == {0}
    assert _gpu_indices_from_fd_targets(_targets(section, device=5)) == {5}
    counts = _gpu_fd_counts(_targets(section, device=0))
    assert counts[0] == 23


def test_control_uvm_caps_and_switch_files_are_not_gpus() -> None:
    targets = [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-modeset",
        "/dev/nvidia-caps/nvidia-cap1",
        "/dev/nvidia-caps/nvidia-cap2",
        "/dev/nvidia-nvswitch0",
        "/dev/nvidia-nvlink",
        "/srv/job/dev/nvidia0",
        "/dev/nvidia0 (deleted)",
        "socket:[48213]",
        "anon_inode:[eventfd]",
    ]
    assert _gpu_indices_from_fd_targets(targets) == set()
    assert _gpu_indices_from_fd_targets(["/dev/nvidia12", "/dev/nvidia3"]) == {3, 12}


def test_fd_mapping_prefers_the_gpu_holding_the_context() -> None:
    # the context's GPU holds many fds; a handful on the others come from enumeration
    targets = _targets(_fd_sections()["capture"], device=2)
    targets += [f"/dev/nvidia{minor}" for minor in range(8) if minor != 2]
    uses = _uses_from_fd_targets(targets, GpuReading(error=nvml.NO_DRIVER))
    assert uses == (GpuProcessUse(gpu_index=2, source="fd"),)


def test_fd_mapping_goes_through_minor_numbers() -> None:
    # a container given physical GPU 3 sees /dev/nvidia3, which NVML there calls index 0
    reading = GpuReading(gpus=(_h200(0, 0.0, 0),), minors={3: 0})
    uses = _uses_from_fd_targets(_targets(_fd_sections()["capture"], device=3), reading)
    assert uses == (GpuProcessUse(gpu_index=0, source="fd"),)
    assert _uses_from_fd_targets(["/dev/nvidia5"], reading) == ()


# --- CUDA_VISIBLE_DEVICES ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "entries"),
    [
        (None, None),
        ("", ()),
        ("0", ("0",)),
        ("3", ("3",)),
        ("0,1", ("0", "1")),
        (" 0 , 1 ", ("0", "1")),
        ("-1", ()),
        ("2,-1,3", ("2",)),
        (H200_UUIDS[1], (H200_UUIDS[1],)),
    ],
)
def test_visible_devices(value: str | None, entries: tuple[str, ...] | None) -> None:
    assert _visible_devices(value) == entries


@pytest.mark.parametrize(
    ("value", "index"),
    [
        ("0", 0),
        ("1", 1),
        ("3", None),  # not a GPU of this host
        ("0,1", None),
        ("", None),
        (None, None),
        (H200_UUIDS[1], 1),
        (H200_UUIDS[0][:12], 0),  # CUDA accepts a unique UUID prefix
        ("GPU-", None),  # ambiguous prefix
        ("MIG-0e1c3b5a-9a2f-5d8e-b1c4-7f6a2d9e0c13", None),
    ],
)
def test_env_gpu_index(value: str | None, index: int | None) -> None:
    gpus = (_h200(0, 100.0, 1 << 30), _h200(1, 0.0, 1 << 30))
    assert _env_gpu_index(value, gpus) == index


def test_env_index_without_nvml_is_taken_as_is() -> None:
    assert _env_gpu_index("3", ()) == 3
    assert _env_gpu_index(H200_UUIDS[0], ()) is None


# --- gpus_of_process on real processes -----------------------------------------------------


def test_gpus_of_process_prefers_nvml(sleeper: subprocess.Popen[bytes]) -> None:
    held = (GpuProcessUse(gpu_index=1, used_memory=81 << 30, source="nvml"),)
    reading = GpuReading(gpus=(_h200(0, 0.0, 0), _h200(1, 100.0, 81 << 30)),
                         per_pid={sleeper.pid: held})
    assert gpus_of_process(sleeper.pid, {"CUDA_VISIBLE_DEVICES": "0"}, reading) == held


def test_gpus_of_process_falls_back_to_env(sleeper: subprocess.Popen[bytes]) -> None:
    reading = GpuReading(gpus=(_h200(0, 0.0, 0), _h200(1, 100.0, 81 << 30)))
    uses = gpus_of_process(sleeper.pid, {"CUDA_VISIBLE_DEVICES": H200_UUIDS[1]}, reading)
    assert uses == (GpuProcessUse(gpu_index=1, source="env"),)
    assert gpus_of_process(sleeper.pid, {"CUDA_VISIBLE_DEVICES": "0,1"}, reading) == ()
    assert gpus_of_process(sleeper.pid, {}, reading) == ()
    no_nvml = read_gpus() if read_gpus().error else GpuReading(error=nvml.NO_DRIVER)
    assert gpus_of_process(sleeper.pid, {"CUDA_VISIBLE_DEVICES": "3"}, no_nvml) == (
        GpuProcessUse(gpu_index=3, source="env"),
    )


def test_gpus_of_vanished_process() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    reading = GpuReading(error=nvml.NO_DRIVER)
    assert gpus_of_process(proc.pid, {}, reading) == ()
    assert gpus_of_process(proc.pid, {"CUDA_VISIBLE_DEVICES": "2"}, reading) == (
        GpuProcessUse(gpu_index=2, source="env"),
    )


# --- merge_readings ------------------------------------------------------------------------


def test_merge_readings_over_a_window() -> None:
    a, b, c = 4242, 4243, 4244
    first = GpuReading(
        gpus=(_h200(0, 100.0, 70 << 30), _h200(1, 0.0, 2 << 30)),
        per_pid={a: (GpuProcessUse(0, 70 << 30, "nvml"),), b: (GpuProcessUse(1, 2 << 30, "nvml"),)},
        minors={0: 0, 1: 1},
    )
    second = GpuReading(
        gpus=(
            _h200(0, 98.0, 71 << 30, health=("throttled: HW slowdown",)),
            _h200(1, 3.0, 3 << 30),
        ),
        per_pid={a: (GpuProcessUse(0, None, "nvml"),), c: (GpuProcessUse(1, 1 << 30, "nvml"),)},
        minors={0: 0, 1: 1},
    )
    third = GpuReading(
        gpus=(_h200(0, 99.0, 72 << 30), _h200(1, None, 3 << 30)),
        per_pid={b: (GpuProcessUse(1, 3 << 30, "nvml"),)},
        minors={0: 0, 1: 1},
    )
    merged = merge_readings([first, second, third])
    assert merged.error is None
    gpu0, gpu1 = merged.gpus
    assert gpu0.utilization_samples == (100.0, 98.0, 99.0)
    assert gpu0.utilization == pytest.approx(99.0)
    assert gpu0.memory_used == 72 << 30
    assert gpu0.health == ("throttled: HW slowdown",)
    assert gpu1.utilization_samples == (0.0, 3.0)
    assert gpu1.utilization == pytest.approx(1.5)
    assert gpu1.memory_used == 3 << 30
    assert merged.per_pid == {
        a: (GpuProcessUse(0, 70 << 30, "nvml"),),  # last known memory kept
        b: (GpuProcessUse(1, 3 << 30, "nvml"),),
        c: (GpuProcessUse(1, 1 << 30, "nvml"),),
    }
    assert merged.minors == {0: 0, 1: 1}
    # merging is stable: a merged reading merges like its samples
    again = merge_readings([merge_readings([first, second]), third])
    assert again.gpus == merged.gpus


def test_merge_readings_errors() -> None:
    assert merge_readings([]).error == nvml.NOT_SAMPLED
    failed = GpuReading(error=nvml.NO_DRIVER)
    assert merge_readings([failed, failed]) == GpuReading(error=nvml.NO_DRIVER)
    ok = GpuReading(gpus=(_h200(0, 50.0, 1 << 30),))
    merged = merge_readings([failed, ok])
    assert merged.error is None
    assert merged.gpus[0].utilization == 50.0


def test_merge_real_readings() -> None:
    readings = [read_gpus(), read_gpus()]
    merged = merge_readings(readings)
    assert merged.error == readings[-1].error
    for gpu in merged.gpus:
        assert len(gpu.utilization_samples) in (0, 2)


# --- gpu_activity --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("utils", "cpu", "waiting", "kind"),
    [
        ([100.0, 100.0, 100.0], 99.0, True, GPU_BUSY_HOST_WAITING),  # libcuda spin-waits a sync
        ([100.0, 92.0, 95.0], 0.0, True, GPU_BUSY_HOST_WAITING),
        ([0.0, 0.0], 0.1, True, GPU_IDLE_HOST_IDLE),
        ([0.0, 4.0], 2.0, False, GPU_IDLE_HOST_IDLE),
        ([0.0], None, True, GPU_IDLE_HOST_IDLE),
        ([100.0, 100.0], 100.0, False, GPU_BUSY),
        ([40.0, 60.0], 30.0, True, GPU_BUSY),
        ([0.0, 0.0], 100.0, False, GPU_IDLE),
        ([0.0], None, False, GPU_IDLE),
        ([], 0.0, True, None),
    ],
)
def test_gpu_activity(
    utils: list[float], cpu: float | None, waiting: bool, kind: str | None
) -> None:
    assert gpu_activity(utils, cpu, waiting) == kind


def test_gpu_activity_thresholds() -> None:
    assert gpu_activity([GPU_BUSY_MIN_PERCENT], 0.0, True) == GPU_BUSY_HOST_WAITING
    assert gpu_activity([GPU_BUSY_MIN_PERCENT - 1], 0.0, True) == GPU_BUSY
    assert gpu_activity([GPU_IDLE_MAX_PERCENT], 0.0, False) == GPU_IDLE_HOST_IDLE
    assert gpu_activity([GPU_IDLE_MAX_PERCENT + 1], 0.0, False) == GPU_BUSY


def test_describe_activity() -> None:
    sentences = [describe_activity(kind) for kind in ACTIVITY_KINDS]
    assert len(set(sentences)) == len(ACTIVITY_KINDS)
    assert "spinning" in describe_activity(GPU_BUSY_HOST_WAITING)
    assert "NCCL" in describe_activity(GPU_BUSY_HOST_WAITING)
    assert "upstream" in describe_activity(GPU_IDLE_HOST_IDLE)
    assert "unknown" in describe_activity(None)
    for sentence in sentences:
        assert "\n" not in sentence and not sentence.endswith(".")


# --- real GPU tier -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> GpuReading:
    reading = read_gpus()
    if reading.error is not None:
        pytest.skip(f"needs an NVIDIA GPU: {reading.error}")
    return reading


@pytest.mark.gpu
def test_live_gpus_are_read(live: GpuReading) -> None:
    assert live.error is None
    assert [gpu.index for gpu in live.gpus] == list(range(len(live.gpus)))
    for gpu in live.gpus:
        assert gpu.name and gpu.name.startswith("NVIDIA")
        assert gpu.uuid and gpu.uuid.startswith(("GPU-", "MIG-"))
        assert gpu.pci_bus and re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d",
                                            gpu.pci_bus)
        assert gpu.memory_total and gpu.memory_total > 1 << 30
        assert gpu.memory_used is not None and 0 <= gpu.memory_used <= gpu.memory_total
        assert gpu.utilization is not None and 0.0 <= gpu.utilization <= 100.0
        assert gpu.utilization_samples == (gpu.utilization,)
        assert gpu.temperature is not None and 0 < gpu.temperature < 120
        assert gpu.power_w is not None and 0.0 < gpu.power_w < 2000.0
        assert gpu.sm_clock_mhz is not None and gpu.sm_clock_mhz > 0
        assert all(isinstance(line, str) and line for line in gpu.health)
    assert sorted(live.minors.values()) == list(range(len(live.gpus)))
    for uses in live.per_pid.values():
        assert all(use.source == "nvml" for use in uses)


@pytest.mark.gpu
def test_live_reads_merge(live: GpuReading) -> None:
    readings = [live, read_gpus(), read_gpus()]
    merged = merge_readings(readings)
    assert merged.error is None
    assert len(merged.gpus) == len(live.gpus)
    for gpu in merged.gpus:
        assert len(gpu.utilization_samples) == 3


@pytest.mark.gpu
def test_live_reads_are_fast(live: GpuReading) -> None:
    start = time.perf_counter()
    for _ in range(5):
        assert read_gpus().error is None
    assert (time.perf_counter() - start) / 5 < 0.5


@pytest.mark.gpu
def test_live_process_without_gpu(live: GpuReading, sleeper: subprocess.Popen[bytes]) -> None:
    assert gpus_of_process(sleeper.pid, {}, live) == ()
    assert gpus_of_process(sleeper.pid, {"CUDA_VISIBLE_DEVICES": "0"}, live) == (
        GpuProcessUse(gpu_index=0, source="env"),
    )
