"""GPU facts from NVML: per-GPU state and which processes hold which GPU.

The only module that imports ``pynvml`` (the ``nvidia-ml-py`` package). Every NVML call goes
through one chokepoint, :func:`_nvml_call`, which turns NVML failures into recorded reasons:

* the library is missing or the driver is not loaded -> ``"no NVIDIA driver"``
* the driver is loaded but there is no GPU           -> ``"no NVIDIA GPU"``
* ``NVML_ERROR_NO_PERMISSION`` while opening NVML     -> ``"no permission to read NVML"``
* ``NVML_ERROR_NOT_SUPPORTED`` (or another per-field failure) for one field -> that field ``None``
* ``NVML_ERROR_GPU_IS_LOST`` / ``RESET_REQUIRED`` on one GPU -> a line in that GPU's ``health``

Errors are told apart by pynvml's error value (``NVMLError.value``), never by message text.
:func:`read_gpus` never raises. NVML is initialised once per process, lazily, and never shut down.

Why one file: pynvml is imported, initialised and called here alone, through ``_nvml_call``;
the GPU-per-process reads and the GPM window use that chokepoint and its error values, so a
split would export the chokepoint and let a second module call NVML its own way.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean
from typing import Any

from hangscope.collect import procfs
from hangscope.model import Gpu, GpuProcessUse
from hangscope.model.progress import GpmReading

# pynvml, imported at the first NVML call (on a sampler thread, beside the first py-spy
# round): its import costs a cold dump ~15 ms (issue 22). None: not installed.
pynvml: Any = None
_imported = False


def _bindings() -> Any:
    global pynvml, _imported
    if not _imported:
        _imported = True
        try:
            import pynvml as module
        except ImportError:  # nvidia-ml-py is a dependency; a broken install must not crash us
            module = None
        pynvml = module
    return pynvml

NO_DRIVER = "no NVIDIA driver"
NO_GPU = "no NVIDIA GPU"
NO_PERMISSION = "no permission to read NVML"
NO_BINDINGS = "nvidia-ml-py (pynvml) is not installed"
VERSION_MISMATCH = (
    "NVIDIA driver/library version mismatch (the driver was updated: reload the nvidia "
    "kernel module or reboot)"
)
NOT_SAMPLED = "GPUs were not sampled"

# NVML error values (nvml.h ``nvmlReturn_t``; the same numbers as pynvml.NVML_ERROR_*).
_ERR_UNINITIALIZED = 1
_ERR_NOT_SUPPORTED = 3
_ERR_NO_PERMISSION = 4
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_GPU_IS_LOST = 15
_ERR_RESET_REQUIRED = 16
_ERR_LIB_RM_VERSION_MISMATCH = 18
_ERR_GPU_NOT_FOUND = 28

# Failures that make NVML as a whole unusable, wherever they happen.
_UNUSABLE: dict[int, str] = {
    _ERR_LIBRARY_NOT_FOUND: NO_DRIVER,
    _ERR_DRIVER_NOT_LOADED: NO_DRIVER,
    _ERR_LIB_RM_VERSION_MISMATCH: VERSION_MISMATCH,
    _ERR_GPU_NOT_FOUND: NO_GPU,
    _ERR_UNINITIALIZED: "NVML was shut down while in use",
}
# Failures that take one GPU away; the rest of the machine stays readable.
_DEVICE_GONE: dict[int, str] = {
    _ERR_GPU_IS_LOST: "GPU is lost (fallen off the bus: see Xid 79 in dmesg)",
    _ERR_RESET_REQUIRED: "GPU requires a reset",
}

# nvml.h constants used below (stable ABI values).
_TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
_CLOCK_SM = 1  # NVML_CLOCK_SM
_MEMORY_ERROR_UNCORRECTED = 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_VOLATILE_ECC = 0  # NVML_VOLATILE_ECC: since the driver last loaded
_RETIRED_SBE = 0  # NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
_RETIRED_DBE = 1  # NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
# nvmlClocksEventReason* bits that mean the hardware is holding the clocks down. GpuIdle,
# application clocks, SW power cap, sync boost and display clock are normal operation.
_THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x08, "HW slowdown"),
    (0x40, "HW thermal slowdown"),
    (0x80, "HW power brake slowdown"),
    (0x20, "SW thermal slowdown"),
)

# /dev/nvidiaN is one GPU (N is its minor number); /dev/nvidiactl, /dev/nvidia-uvm,
# /dev/nvidia-uvm-tools, /dev/nvidia-modeset, /dev/nvidia-nvswitchN, /dev/nvidia-caps/* are not.
_GPU_DEVICE_FILE = re.compile(r"/dev/nvidia(\d+)")
# A process whose CUDA context lives on one GPU may still hold a few fds on every other GPU it
# enumerated at cuInit; a device is counted as used when it has at least this share of the
# largest per-device fd count.
FD_SHARE_IN_USE = 0.5


@dataclass(frozen=True)
class GpuReading:
    """One read of every GPU on this host, or the reason none could be read."""

    gpus: tuple[Gpu, ...] = ()
    per_pid: dict[int, tuple[GpuProcessUse, ...]] = field(default_factory=dict)
    error: str | None = None  # the reason when NVML is unusable; gpus is empty then
    # /dev/nvidiaN minor number -> NVML index (``nvidia-smi -q | grep Minor``); the two differ
    # in containers given a subset of GPUs, so fd-based mapping goes through this.
    minors: dict[int, int] = field(default_factory=dict)


class _Unusable(Exception):
    """NVML as a whole cannot be read. Raised by the chokepoint, caught in read_gpus."""

    def __init__(self, reason: str, value: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.value = value


class _DeviceGone(Exception):
    """One GPU stopped answering. Raised by the chokepoint, caught per device."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _reason_for(value: int | None, name: str) -> str:
    """The recorded reason for a failure that leaves NVML unusable."""
    if value is not None and value in _UNUSABLE:
        return _UNUSABLE[value]
    if value == _ERR_NO_PERMISSION:
        return NO_PERMISSION
    if value is not None and value in _DEVICE_GONE:
        return _DEVICE_GONE[value]
    return f"NVML unusable: {name}"


def _nvml_call(name: str, *args: Any, required: bool = False) -> Any:
    """The chokepoint: call ``pynvml.<name>(*args)``; the one place NVML failures are handled.

    Returns the value, or ``None`` when this one field cannot be read (NOT_SUPPORTED, NO_DATA,
    NO_PERMISSION on a single query, a function this driver or pynvml lacks, ...).
    Raises :class:`_Unusable` when NVML as a whole is gone (no library, no driver, version
    mismatch, shut down), or for any failure when ``required`` (init, device count).
    Raises :class:`_DeviceGone` when the GPU behind a handle is lost or needs a reset.
    """
    if _bindings() is None:
        raise _Unusable(NO_BINDINGS)
    fn: Callable[..., Any] | None = getattr(pynvml, name, None)
    if fn is None:
        if required:
            raise _Unusable(f"NVML unusable: this nvidia-ml-py lacks {name}")
        return None
    try:
        return fn(*args)
    except pynvml.NVMLError as err:
        value: int | None = getattr(err, "value", None)
        if required or (value is not None and value in _UNUSABLE):
            raise _Unusable(_reason_for(value, type(err).__name__), value) from None
        if value is not None and value in _DEVICE_GONE:
            raise _DeviceGone(_DEVICE_GONE[value]) from None
        return None  # NOT_SUPPORTED, NO_PERMISSION, NO_DATA, FUNCTION_NOT_FOUND, UNKNOWN, ...
    except pynvml.NVMLLibraryMismatchError:
        # an unversioned pynvml wrapper whose versioned symbol this (older) driver lacks
        if required:
            raise _Unusable(f"NVML unusable: driver lacks {name}") from None
        return None
    except (OSError, ValueError, UnicodeDecodeError):  # ctypes or decoding trouble in pynvml
        if required:
            raise _Unusable(f"NVML unusable: {name} failed") from None
        return None


_init_lock = threading.Lock()
_init_done = False
_init_reason: str | None = None


def _ensure_init() -> None:
    """``nvmlInit`` once per process (it takes tens of ms); failures are remembered too.

    Never paired with ``nvmlShutdown``: other threads may be mid-query, and the OS cleans up.
    """
    global _init_done, _init_reason
    with _init_lock:
        if not _init_done:
            try:
                _nvml_call("nvmlInit", required=True)
            except _Unusable as exc:
                _init_reason = exc.reason
            _init_done = True
        if _init_reason is not None:
            raise _Unusable(_init_reason)


def _forget_init() -> None:
    """NVML was shut down under us (someone else called nvmlShutdown): init again next time."""
    global _init_done, _init_reason
    with _init_lock:
        _init_done = False
        _init_reason = None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def _health(handle: Any) -> tuple[tuple[str, ...], int | None]:
    """Health lines and the retired page count of one GPU.

    ``nvidia-smi --query-gpu=ecc.errors.uncorrected.volatile.total,clocks_event_reasons.active,
    retired_pages.sbe,retired_pages.dbe,retired_pages.pending,remapped_rows.pending,
    remapped_rows.failure``. Retired pages exist up to Volta; Ampere and later (A100, H100,
    H200) remap rows instead, so there ``retired_pages`` is None and remapping shows in health.
    """
    health: list[str] = []
    ecc = _nvml_call(
        "nvmlDeviceGetTotalEccErrors", handle, _MEMORY_ERROR_UNCORRECTED, _VOLATILE_ECC
    )
    if ecc:
        health.append(f"ECC uncorrectable errors: {int(ecc)}")
    reasons = _nvml_call("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = _nvml_call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    if reasons:
        active = [label for bit, label in _THROTTLE_REASONS if int(reasons) & bit]
        if active:
            health.append("throttled: " + ", ".join(active))
    sbe = _nvml_call("nvmlDeviceGetRetiredPages", handle, _RETIRED_SBE)
    dbe = _nvml_call("nvmlDeviceGetRetiredPages", handle, _RETIRED_DBE)
    retired = None if sbe is None and dbe is None else len(sbe or ()) + len(dbe or ())
    if _nvml_call("nvmlDeviceGetRetiredPagesPendingStatus", handle):
        health.append("retired pages pending (reset the GPU to retire them)")
    remap = _nvml_call("nvmlDeviceGetRemappedRows", handle)
    if remap is not None:
        _corr, _unc, pending, failure = remap
        if failure:
            health.append("row remapping failed (the GPU needs service)")
        if pending:
            health.append("row remapping pending (reset the GPU to apply it)")
    return tuple(health), retired


def _processes(handle: Any) -> list[tuple[int, int | None]]:
    """(pid, used bytes) of compute and graphics contexts on one GPU.

    ``nvidia-smi --query-compute-apps=pid,used_memory`` plus the graphics list. PIDs are in
    NVML's (host) PID namespace: inside a container the list is often empty.
    """
    found: dict[int, int | None] = {}
    for names in (
        ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"),
        ("nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses_v2"),
    ):
        procs = None
        for name in names:
            procs = _nvml_call(name, handle)
            if procs is not None:
                break
        for proc in procs or ():
            pid = getattr(proc, "pid", None)
            if not isinstance(pid, int):
                continue
            used = getattr(proc, "usedGpuMemory", None)
            used = int(used) if isinstance(used, int) else None
            if found.get(pid) is None:
                found[pid] = used
    return list(found.items())


def _read_device(index: int) -> tuple[Gpu, list[tuple[int, int | None]], int | None]:
    """One GPU, its processes, and its /dev/nvidiaN minor number."""
    try:
        handle = _nvml_call("nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            return Gpu(index=index), [], None
        name = _text(_nvml_call("nvmlDeviceGetName", handle))  # --query-gpu=name
        uuid = _text(_nvml_call("nvmlDeviceGetUUID", handle))  # --query-gpu=uuid
        pci = _nvml_call("nvmlDeviceGetPciInfo", handle)  # --query-gpu=pci.bus_id
        util = _nvml_call("nvmlDeviceGetUtilizationRates", handle)  # --query-gpu=utilization.gpu
        mem = _nvml_call("nvmlDeviceGetMemoryInfo", handle)  # --query-gpu=memory.used,memory.total
        temp = _nvml_call(  # --query-gpu=temperature.gpu
            "nvmlDeviceGetTemperature", handle, _TEMPERATURE_GPU
        )
        power_mw = _nvml_call("nvmlDeviceGetPowerUsage", handle)  # --query-gpu=power.draw
        sm_clock = _nvml_call("nvmlDeviceGetClockInfo", handle, _CLOCK_SM)  # --query-gpu=clocks.sm
        minor = _nvml_call("nvmlDeviceGetMinorNumber", handle)  # nvidia-smi -q: Minor Number
        health, retired = _health(handle)
        procs = _processes(handle)
    except _DeviceGone as gone:
        return Gpu(index=index, health=(gone.reason,)), [], None
    utilization = float(util.gpu) if util is not None else None
    gpu = Gpu(
        index=index,
        name=name,
        uuid=uuid,
        pci_bus=_text(getattr(pci, "busId", None)) if pci is not None else None,
        utilization=utilization,
        utilization_samples=(utilization,) if utilization is not None else (),
        memory_used=int(mem.used) if mem is not None else None,
        memory_total=int(mem.total) if mem is not None else None,
        temperature=int(temp) if temp is not None else None,
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        sm_clock_mhz=int(sm_clock) if sm_clock is not None else None,
        retired_pages=retired,
        health=health,
    )
    return gpu, procs, int(minor) if minor is not None else None


def _read() -> GpuReading:
    _ensure_init()
    count = _nvml_call("nvmlDeviceGetCount", required=True)  # nvidia-smi --list-gpus | wc -l
    if not count:
        return GpuReading(error=NO_GPU)
    gpus: list[Gpu] = []
    per_pid: dict[int, list[GpuProcessUse]] = {}
    minors: dict[int, int] = {}
    for index in range(int(count)):
        gpu, procs, minor = _read_device(index)
        gpus.append(gpu)
        if minor is not None:
            minors[minor] = index
        for pid, used in procs:
            per_pid.setdefault(pid, []).append(
                GpuProcessUse(gpu_index=index, used_memory=used, source="nvml")
            )
    return GpuReading(
        gpus=tuple(gpus),
        per_pid={pid: tuple(uses) for pid, uses in per_pid.items()},
        minors=minors,
    )


def read_gpus() -> GpuReading:
    """Read every GPU once (``nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,
    utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm``, plus
    ``--query-compute-apps=pid,used_memory``). Never raises: an unusable NVML is ``error``."""
    try:
        return _read()
    except _Unusable as exc:
        if exc.value == _ERR_UNINITIALIZED:
            _forget_init()
        return GpuReading(error=exc.reason)
    except Exception as exc:  # last resort: a debugger must not die on a sick GPU stack
        return GpuReading(error=f"internal error reading NVML: {type(exc).__name__}: {exc}")


def _last_known(values: Iterable[Any]) -> Any:
    known = None
    for value in values:
        if value is not None:
            known = value
    return known


def _samples(gpu: Gpu) -> tuple[float, ...]:
    if gpu.utilization_samples:
        return gpu.utilization_samples
    return (gpu.utilization,) if gpu.utilization is not None else ()


def _merge_gpu(seen: Sequence[Gpu]) -> Gpu:
    samples = tuple(s for gpu in seen for s in _samples(gpu))
    health: list[str] = []
    for gpu in seen:
        health.extend(line for line in gpu.health if line not in health)
    merged = {
        name: _last_known(getattr(gpu, name) for gpu in seen)
        for name in (
            "name", "uuid", "pci_bus", "memory_used", "memory_total", "temperature",
            "power_w", "sm_clock_mhz", "retired_pages",
        )
    }
    return replace(
        seen[-1],
        utilization=fmean(samples) if samples else None,
        utilization_samples=samples,
        health=tuple(health),
        **merged,
    )


def merge_readings(readings: Sequence[GpuReading]) -> GpuReading:
    """Merge the readings of one sample window.

    Per GPU (matched by index): ``utilization`` is the mean of every sample,
    ``utilization_samples`` the per-sample values in order, memory and the other gauges the
    last known value, ``health`` every line seen. ``per_pid`` is the union over the window, with
    each process's last known memory per GPU. ``error`` is set only when no reading succeeded.
    """
    good = [r for r in readings if r.error is None]
    if not good:
        return GpuReading(error=readings[-1].error if readings else NOT_SAMPLED)
    by_index: dict[int, list[Gpu]] = {}
    for reading in good:
        for gpu in reading.gpus:
            by_index.setdefault(gpu.index, []).append(gpu)
    per_pid: dict[int, dict[int, GpuProcessUse]] = {}
    minors: dict[int, int] = {}
    for reading in good:
        minors.update(reading.minors)
        for pid, uses in reading.per_pid.items():
            held = per_pid.setdefault(pid, {})
            for use in uses:
                before = held.get(use.gpu_index)
                if use.used_memory is None and before is not None:
                    use = replace(use, used_memory=before.used_memory)
                held[use.gpu_index] = use
    return GpuReading(
        gpus=tuple(_merge_gpu(by_index[index]) for index in sorted(by_index)),
        per_pid={
            pid: tuple(held[index] for index in sorted(held)) for pid, held in per_pid.items()
        },
        minors=minors,
    )


def _gpu_fd_counts(targets: Iterable[str]) -> Counter[int]:
    """How many fds point at each ``/dev/nvidiaN`` (N = minor number)."""
    counts: Counter[int] = Counter()
    for target in targets:
        match = _GPU_DEVICE_FILE.fullmatch(target)
        if match:
            counts[int(match.group(1))] += 1
    return counts


def _gpu_indices_from_fd_targets(targets: Iterable[str]) -> set[int]:
    """The GPU minor numbers among fd link targets (``ls -l /proc/PID/fd | grep nvidia``).

    ``/dev/nvidia3`` -> 3; ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-caps/*``,
    ``/dev/nvidia-nvswitchN`` and ``/dev/nvidia-modeset`` are not GPUs.
    """
    return set(_gpu_fd_counts(targets))


def _gpus_in_use(counts: Counter[int]) -> set[int]:
    """Devices holding a real share of the fds, not just the few cuInit opens on each GPU."""
    if not counts:
        return set()
    most = max(counts.values())
    return {minor for minor, n in counts.items() if n >= most * FD_SHARE_IN_USE}


def _uses_from_fd_targets(
    targets: Iterable[str], reading: GpuReading
) -> tuple[GpuProcessUse, ...]:
    """The GPUs a process uses according to its fd targets, as NVML indices (source "fd")."""
    in_use = _gpus_in_use(_gpu_fd_counts(targets))
    if reading.minors:
        indices = {reading.minors[m] for m in in_use if m in reading.minors}
    else:
        indices = in_use  # NVML unreadable: the minor number is the best guess at the index
    return tuple(GpuProcessUse(gpu_index=i, source="fd") for i in sorted(indices))


def _fd_targets(pid: int) -> list[str]:
    """``readlink /proc/PID/fd/*``; whatever is readable (permission or a vanished PID: [])."""
    return procfs.read_fd_targets(pid)


def _visible_devices(value: str | None) -> tuple[str, ...] | None:
    """CUDA_VISIBLE_DEVICES as entries; None when unset, () when it hides every GPU."""
    if value is None:
        return None
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if entry.lstrip("-").isdigit() and int(entry) < 0:
            break  # CUDA stops at the first invalid index: "-1" hides everything after it
        entries.append(entry)
    return tuple(entries)


def _env_gpu_index(value: str | None, gpus: Sequence[Gpu]) -> int | None:
    """The one GPU index CUDA_VISIBLE_DEVICES names, else None.

    ``"3"`` -> 3, ``"GPU-<uuid>"`` (or a unique prefix of it) -> that GPU's index in ``gpus``;
    several devices, none, or a MIG UUID -> None. An index is CUDA's numbering, which equals
    NVML's on machines of identical GPUs (or with CUDA_DEVICE_ORDER=PCI_BUS_ID).
    """
    entries = _visible_devices(value)
    if not entries or len(entries) != 1:
        return None
    entry = entries[0]
    if entry.isdigit():
        index = int(entry)
        if gpus and all(gpu.index != index for gpu in gpus):
            return None
        return index
    if entry.startswith("GPU-"):
        matches = [gpu.index for gpu in gpus if gpu.uuid and gpu.uuid.startswith(entry)]
        return matches[0] if len(matches) == 1 else None
    return None


def gpus_of_process(
    pid: int, environ: Mapping[str, str], reading: GpuReading,
    fd_targets: Sequence[str] | None = None,
) -> tuple[GpuProcessUse, ...]:
    """The GPUs a process uses, from the best source available.

    1. NVML's process lists (``source="nvml"``, with memory; ``nvidia-smi --query-compute-apps``);
    2. ``/dev/nvidiaN`` among ``/proc/PID/fd`` link targets (``source="fd"``), for containers
       where NVML shows no PIDs; minor numbers map to NVML indices through ``reading.minors``;
    3. CUDA_VISIBLE_DEVICES from ``environ`` naming exactly one device (``source="env"``).
    Returns ``()`` when none says; never raises. ``fd_targets``: the links the caller already
    read (the sampler has them), so ``/proc/PID/fd`` is not listed twice.
    """
    held = reading.per_pid.get(pid)
    if held:
        return held
    targets = _fd_targets(pid) if fd_targets is None else fd_targets
    from_fds = _uses_from_fd_targets(targets, reading)
    if from_fds:
        return from_fds
    index = _env_gpu_index(environ.get("CUDA_VISIBLE_DEVICES"), reading.gpus)
    if index is not None:
        return (GpuProcessUse(gpu_index=index, source="env"),)
    return ()


# --- GPM: what the SMs do over a window (Hopper and later) ----------------------------------
#
# ``utilization.gpu`` says a kernel was resident, not that it did anything: a kernel spinning on a
# flag reads 100%. GPM counts what the SMs did between two samples, so a spin (graphics busy,
# SMs, memory and math pipes idle) is told from work. ``nvidia-smi dmon --gpm-metrics 1,2,3,10,12``.

#: (pynvml constant, our name). Names resolved with getattr: pynvml renumbered these across
#: versions, so a number is never written here.
GPM_METRICS: tuple[tuple[str, str], ...] = (
    ("NVML_GPM_METRIC_GRAPHICS_UTIL", "graphics"),
    ("NVML_GPM_METRIC_SM_UTIL", "sm"),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", "sm_occupancy"),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", "dram"),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", "tensor"),
    ("NVML_GPM_METRIC_FP32_UTIL", "fp32"),
    ("NVML_GPM_METRIC_FP16_UTIL", "fp16"),
    ("NVML_GPM_METRIC_FP64_UTIL", "fp64"),
    ("NVML_GPM_METRIC_INTEGER_UTIL", "integer"),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", "nvlink_rx_mib_s"),
    ("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", "nvlink_tx_mib_s"),
    ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", "pcie_tx_mib_s"),
    ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", "pcie_rx_mib_s"),
)
GPM_UNSUPPORTED = "GPM is not supported on this GPU (it needs Hopper or newer)"


class GpmWindow:
    """Two GPM samples per GPU around a window: :meth:`start`, then :meth:`stop`. Never raises.

    ``nvidia-smi dmon --gpm-metrics ...`` over the window, read without pausing anything.
    """

    def __init__(self, indices: Iterable[int] | None = None) -> None:
        self._indices = None if indices is None else sorted(set(indices))
        self._open: dict[int, tuple[Any, Any, float]] = {}  # index -> (handle, sample, t0)
        self._failed: dict[int, str] = {}
        self.error: str | None = None  # NVML as a whole unusable

    def start(self) -> None:
        """Take the first sample of every GPU that supports GPM."""
        try:
            _ensure_init()
            count = int(_nvml_call("nvmlDeviceGetCount", required=True) or 0)
        except _Unusable as exc:
            self.error = exc.reason
            return
        for index in self._indices if self._indices is not None else range(count):
            try:
                handle = _nvml_call("nvmlDeviceGetHandleByIndex", index)
                support = _nvml_call("nvmlGpmQueryDeviceSupport", handle) if handle else None
                if handle is None or not getattr(support, "isSupportedDevice", 0):
                    self._failed[index] = GPM_UNSUPPORTED
                    continue
                sample = _nvml_call("nvmlGpmSampleAlloc")
                if sample is None or _nvml_call("nvmlGpmSampleGet", handle, sample) is None:
                    self._failed[index] = "GPM sample could not be read"
                    continue
                self._open[index] = (handle, sample, time.monotonic())
            except (_DeviceGone, _Unusable) as exc:
                self._failed[index] = exc.reason

    def stop(self) -> tuple[GpmReading, ...]:
        """Take the second sample and compute the metrics; frees every GPM sample."""
        readings = [GpmReading(index=i, error=reason) for i, reason in self._failed.items()]
        for index, (handle, first, t0) in self._open.items():
            second = None
            try:
                second = _nvml_call("nvmlGpmSampleAlloc")
                if second is None or _nvml_call("nvmlGpmSampleGet", handle, second) is None:
                    readings.append(GpmReading(index=index, error="GPM sample could not be read"))
                    continue
                seconds = time.monotonic() - t0
                readings.append(GpmReading(index, seconds, _gpm_metrics(first, second)))
            except (_DeviceGone, _Unusable) as exc:
                readings.append(GpmReading(index=index, error=exc.reason))
            finally:
                for sample in (first, second):
                    if sample is not None:
                        _free_sample(sample)
        self._open.clear()
        return tuple(sorted(readings, key=lambda r: r.index))


def _free_sample(sample: Any) -> None:
    with contextlib.suppress(_DeviceGone, _Unusable):  # the driver went away: nothing to free
        _nvml_call("nvmlGpmSampleFree", sample)


def _gpm_metrics(first: Any, second: Any) -> dict[str, float]:
    """``nvmlGpmMetricsGet`` for :data:`GPM_METRICS`; a metric the GPU refuses is left out."""
    _bindings()
    wanted = [(getattr(pynvml, const, None), name) for const, name in GPM_METRICS]
    wanted = [(mid, name) for mid, name in wanted if isinstance(mid, int)]
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(wanted)
    request.sample1 = first
    request.sample2 = second
    for slot, (mid, _name) in enumerate(wanted):
        request.metrics[slot].metricId = mid
    if _nvml_call("nvmlGpmMetricsGet", request) is None:
        return {}
    found: dict[str, float] = {}
    for slot, (_mid, name) in enumerate(wanted):
        metric = request.metrics[slot]
        if int(metric.nvmlReturn) == 0:  # NVML_SUCCESS; others: this metric is unsupported
            found[name] = round(float(metric.value), 3)
    return found
