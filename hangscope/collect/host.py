"""Facts of the host as a whole: ``uname -r``, ``free``, the cgroup limit, and the GPUs.

The GPU read goes through :class:`BoundedGpuReader`: NVML behind a deadline, because a wedged
driver can block an NVML call for minutes (``nvidia-smi`` hangs too then).
"""

from __future__ import annotations

import os
import platform
import socket
import threading

from hangscope.collect import nvml, procfs
from hangscope.model import Host


def read_host(reading: nvml.GpuReading) -> Host:
    """This machine: kernel, CPUs, memory, swap, cgroup limit, and the GPUs ``reading`` saw."""
    mem = procfs.meminfo()
    swap_total, swap_free = mem.get("SwapTotal"), mem.get("SwapFree")
    return Host(
        name=socket.gethostname(),
        kernel=platform.release(),
        cpus=os.cpu_count(),
        mem_total=mem.get("MemTotal"),
        mem_available=mem.get("MemAvailable"),
        swap_used=(swap_total - swap_free) if swap_total is not None and swap_free is not None
        else None,
        swap_total=swap_total,
        cgroup_memory_limit=procfs.cgroup_memory_limit(),
        gpus=reading.gpus,
        gpu_error=reading.error,
    )


class BoundedGpuReader:
    """``nvml.read_gpus()`` bounded by a timeout; while one read is stuck, no other starts."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        # A stuck read: its done-event and the reason reported while it stays stuck.
        self._stuck: tuple[threading.Event, str] | None = None

    def read(self) -> nvml.GpuReading:
        if self._stuck is not None and not self._stuck[0].is_set():
            return nvml.GpuReading(error=self._stuck[1])
        done = threading.Event()
        result: list[nvml.GpuReading] = []

        def read() -> None:
            try:
                result.append(nvml.read_gpus())
            finally:
                done.set()

        threading.Thread(target=read, name="hangscope-nvml", daemon=True).start()
        if not done.wait(self.timeout):
            reason = (f"NVML did not answer within {self.timeout:g} s (the driver may "
                      "be wedged: does `nvidia-smi` hang too?)")
            self._stuck = (done, reason)
            return nvml.GpuReading(error=reason)
        self._stuck = None
        return result[0] if result else nvml.GpuReading(error="NVML read failed")
