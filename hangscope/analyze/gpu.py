"""GPU evidence for one rank: what the GPU and the host thread are doing together.

Pure functions: no I/O. The inputs come from the NVML collector (utilization samples over the
window) and from the process sampler (host CPU percent, whether the working thread waits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

# A GPU this busy on average over the window is running a kernel the whole time.
GPU_BUSY_MIN_PERCENT: Final = 90.0
# A GPU (or a host process) this quiet on average is doing nothing.
GPU_IDLE_MAX_PERCENT: Final = 5.0
HOST_IDLE_MAX_CPU_PERCENT: Final = 5.0

GPU_BUSY_HOST_WAITING: Final = "gpu_busy_host_waiting"
GPU_IDLE_HOST_IDLE: Final = "gpu_idle_host_idle"
GPU_BUSY: Final = "gpu_busy"
GPU_IDLE: Final = "gpu_idle"

ACTIVITY_KINDS: Final = (GPU_BUSY_HOST_WAITING, GPU_IDLE_HOST_IDLE, GPU_BUSY, GPU_IDLE)

_DESCRIPTIONS: Final[dict[str, str]] = {
    GPU_BUSY_HOST_WAITING: (
        "GPU fully busy while the host thread waits: a kernel is spinning (NCCL or custom "
        "all-reduce waiting for a peer, or a long kernel)"
    ),
    GPU_IDLE_HOST_IDLE: (
        "GPU idle and the host idle: nothing runs here, so the block is upstream (another "
        "rank, a queue, a lock or I/O)"
    ),
    GPU_BUSY: "GPU busy: kernels are running on it",
    GPU_IDLE: (
        "GPU idle while the host is not waiting on it: the host is busy on the CPU "
        "(Python, data loading, compilation) and launches no GPU work"
    ),
}
_UNKNOWN: Final = "GPU activity unknown (no utilization samples)"


def gpu_activity(
    gpu_utilizations: Sequence[float],
    host_cpu_percent: float | None,
    host_waiting: bool,
) -> str | None:
    """Classify a rank's GPU against its host thread over the sample window.

    ``gpu_utilizations`` are NVML ``utilization.gpu`` samples (percent) for the rank's GPU;
    ``host_cpu_percent`` the rank's CPU use over the window (None: unknown); ``host_waiting``
    whether its working thread is blocked (a wait, a sync, a collective). Returns one of
    ``gpu_busy_host_waiting``, ``gpu_idle_host_idle``, ``gpu_busy``, ``gpu_idle``, or None
    when there is no utilization sample.
    """
    samples = [float(u) for u in gpu_utilizations if u is not None and not math.isnan(u)]
    if not samples:
        return None
    mean = sum(samples) / len(samples)
    if mean >= GPU_BUSY_MIN_PERCENT and host_waiting:
        return GPU_BUSY_HOST_WAITING
    if mean <= GPU_IDLE_MAX_PERCENT:
        host_idle = host_waiting or (
            host_cpu_percent is not None and host_cpu_percent <= HOST_IDLE_MAX_CPU_PERCENT
        )
        return GPU_IDLE_HOST_IDLE if host_idle else GPU_IDLE
    return GPU_BUSY


def describe_activity(kind: str | None) -> str:
    """One plain sentence for a :func:`gpu_activity` result."""
    if kind is None:
        return _UNKNOWN
    return _DESCRIPTIONS.get(kind, _UNKNOWN)
