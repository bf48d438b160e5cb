"""GPU evidence for one rank: what the GPU and the host thread are doing together.

Pure functions: no I/O. The inputs come from the NVML collector (utilization samples over the
window) and from the process sampler (host CPU percent, whether the working thread waits).

Why one file: the per-rank GPU reading, its evidence line and the findings built from it are
one story told three ways; split, the wording of the three drifts apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from hangscope.model import (
    Category,
    Finding,
    Frame,
    Gpu,
    Host,
    Process,
    Role,
    Severity,
    Snapshot,
    Thread,
    category_of,
)
from hangscope.model import kernels as ke
from hangscope.model.categories import WAITING
from hangscope.model.kernels import kernel_text
from hangscope.words import compact_ranks, short_who, size

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


# --- per-rank GPU evidence -------------------------------------------------------------------
#
# What a rank's GPU does, set next to what its host thread does: the line a user reads in the
# verdict's evidence ("GPU 0 100% busy while rank 3's host thread waits in
# cudaDeviceSynchronize: a kernel is spinning") and the findings built from the same facts.

# Categories in which the host thread waits (on the GPU, a peer, a lock, a queue, a file).
_WAITING: Final = WAITING  # the category table (model/categories.py) says which
# Where the wait point is a native API (CUDA, NCCL, the c10d store), not the Python leaf.
_NATIVE_WAITS: Final = frozenset({
    Category.COLLECTIVE, Category.COMM_INIT, Category.CUDA_SYNC, Category.CUDA_LAUNCH,
})
# CUDA runtime and NCCL entry points first, driver entry points next: the name a user knows.
_RUNTIME_API: Final = re.compile(r"^(?:cuda[A-Z]\w*|p?nccl[A-Z]\w*)$")
_DRIVER_API: Final = re.compile(r"^cu[A-Z]\w*$")
_PLUMBING_LIBS: Final = re.compile(r"^(?:libc|libpthread|ld-linux|libpython|python)|^$")
# A host at or above this CPU use inside a CUDA wait is libcuda spin-waiting (SIGNATURES 1.4).
SPIN_WAIT_MIN_CPU_PERCENT: Final = 50.0
EVIDENCE_MAX_RANKS: Final = 16


@dataclass(frozen=True)
class RankGpu:
    """One rank on one of its GPUs over the sample window."""

    proc: Process
    gpu_index: int
    gpu: Gpu | None  # None: NVML did not read this GPU (the note says why, once)
    used_memory: int | None  # bytes this process holds on it (NVML), None: unknown
    category: Category
    activity: str | None  # a gpu_activity() kind
    wait_point: str | None
    compilers: tuple[Process, ...] = ()


def _strip_version(name: str) -> str:
    return re.sub(r"_v\d+$", "", name)


def wait_point(thread: Thread | None) -> str | None:
    """Where a host thread waits, as a user names it.

    CUDA, NCCL and store waits by their native entry point (``cudaDeviceSynchronize`` over the
    driver's ``cuCtxSynchronize``, ``ncclCommInitRank``, ``c10d::TCPStore::waitForWorkers``);
    other waits, or stacks without native frames, by the innermost Python frame.
    """
    if thread is None:
        return None
    category = thread.category or Category.UNKNOWN
    native: list[Frame] = []
    python: Frame | None = None
    for frame in thread.frames:
        if not frame.native:
            python = frame
            break
        native.append(frame)
    if category in _NATIVE_WAITS and native:
        for pattern in (_RUNTIME_API, _DRIVER_API):
            found = [f.name for f in native if pattern.match(f.name)]
            if found:
                api = _strip_version(found[-1])  # the outermost: what the library called
                if category is Category.COLLECTIVE and thread.op and "nccl" not in api.lower():
                    return f"{thread.op} ({api})"  # custom all-reduce blocked in a launch
                return api
        for frame in native:
            module = (frame.module or frame.short_file or "").rsplit("/", 1)[-1]
            if frame.name.startswith(("0x", "pybind11")) or _PLUMBING_LIBS.match(module):
                continue
            return frame.name if len(frame.name) <= 80 else frame.name[:77] + "..."
    if python is not None:
        return f"{python.name} ({python.location})"
    return thread.op


def _by_parent(processes: Sequence[Process],
               ) -> dict[tuple[str | None, int | None], list[Process]]:
    """Children by their parent's (host, PID): PIDs repeat across nodes."""
    by_parent: dict[tuple[str | None, int | None], list[Process]] = {}
    for other in processes:
        by_parent.setdefault((other.host, other.ppid), []).append(other)
    return by_parent


def compiler_children(proc: Process, processes: Sequence[Process],
                      by_parent: dict[tuple[str | None, int | None], list[Process]] | None
                      = None) -> tuple[Process, ...]:
    """The compilers (ptxas, nvcc, ninja, ...) among a process's descendants."""
    if by_parent is None:
        by_parent = _by_parent(processes)
    found: list[Process] = []
    todo: list[tuple[str | None, int | None]] = [proc.key]
    seen = {proc.key}
    while todo:
        for child in by_parent.get(todo.pop(), ()):
            if child.key in seen:
                continue
            seen.add(child.key)
            todo.append(child.key)
            if child.role is Role.COMPILER and not child.is_exited:
                found.append(child)
    return tuple(sorted(found, key=lambda p: p.pid))


def rank_gpus(subjects: Sequence[Process], processes: Sequence[Process],
              hosts: Sequence[Host]) -> list[RankGpu]:
    """Each subject (rank) on each GPU it holds, with what its GPU and host thread did."""
    gpus = {g.index: g for host in hosts for g in host.gpus}
    if not gpus:
        return []  # no NVML reading: nothing to set beside the ranks (the note says why)
    by_parent = _by_parent(processes)
    out: list[RankGpu] = []
    for proc in subjects:
        if not proc.gpus:
            continue
        working = proc.working_thread
        category = category_of(proc, working)
        compilers = compiler_children(proc, processes, by_parent)
        for use in proc.gpus:
            gpu = gpus.get(use.gpu_index)
            samples = _samples(gpu)
            activity = gpu_activity(samples, proc.cpu_percent, category in _WAITING)
            out.append(RankGpu(proc=proc, gpu_index=use.gpu_index, gpu=gpu,
                               used_memory=use.used_memory, category=category,
                               activity=activity, wait_point=wait_point(working),
                               compilers=compilers))
    return out


def _samples(gpu: Gpu | None) -> tuple[float, ...]:
    if gpu is None:
        return ()
    if gpu.utilization_samples:
        return gpu.utilization_samples
    return (gpu.utilization,) if gpu.utilization is not None else ()


def _util(rg: RankGpu) -> str:
    samples = _samples(rg.gpu)
    if not samples:
        return "?%"
    return f"{sum(samples) / len(samples):.0f}%"


def _compilers_text(compilers: Sequence[Process]) -> str:
    names = [f"{(p.cmdline[0].rsplit('/', 1)[-1] if p.cmdline else 'compiler')} (PID {p.pid})"
             for p in compilers[:3]]
    more = f" and {len(compilers) - 3} more" if len(compilers) > 3 else ""
    return ", ".join(names) + more


def _spin_note(rg: RankGpu) -> str:
    """A busy CPU inside a native wait is polling, not work (libcuda, NCCL's bootstrap)."""
    cpu = rg.proc.cpu_percent
    if cpu is None or cpu < SPIN_WAIT_MIN_CPU_PERCENT or rg.category not in _NATIVE_WAITS:
        return ""
    point = rg.wait_point or ""
    who = ("libcuda spin-waiting" if _DRIVER_API.match(point) or point.startswith("cuda")
           else "NCCL polling" if re.match(r"p?nccl", point) else "spin-waiting")
    return f"; the host's {cpu:.0f}% CPU is {who}, not work"


def _spinning_kernel(rg: RankGpu) -> str:
    """What spins: the kernel cuda-gdb named (``--kernels``), else the likely kinds."""
    read = rg.proc.kernels
    kernel = read.main if read is not None else None
    if kernel is not None and (kernel.device is None or kernel.device == rg.gpu_index
                               or len(rg.proc.gpus) == 1):
        more = len(read.kernels) - 1 if read is not None else 0
        return (f"the kernel running is {kernel_text(kernel)} (cuda-gdb"
                + (f"; {more} more kernel{'s' if more > 1 else ''}" if more > 0 else "") + ")")
    text = ("a kernel is spinning (NCCL or custom all-reduce waiting for a peer, or a long "
            "kernel)")
    if read is not None and read.status == ke.NO_KERNELS:
        return (f"cuda-gdb saw no kernel of {short_who(rg.proc)} running, so the busy GPU runs "
                "another process's kernel")
    if read is not None and read.status != ke.READ:
        text += f" (--kernels could not name it: {read.status.replace('_', ' ')})"
    return text


def evidence_line(rg: RankGpu) -> str:
    """One sentence: the GPU, its utilisation and memory, and what it means for this rank."""
    who = short_who(rg.proc)
    util = _util(rg)
    point = rg.wait_point or str(rg.category)
    cpu = rg.proc.cpu_percent
    if rg.category is Category.JIT_COMPILE or (rg.compilers and rg.activity != GPU_BUSY):
        child = f": its compiler child {_compilers_text(rg.compilers)} runs" if rg.compilers else ""
        busy = rg.activity in (GPU_BUSY, GPU_BUSY_HOST_WAITING)
        text = (f"GPU {rg.gpu_index} {f'{util} busy' if busy else f'idle ({util})'} while "
                f"{who} compiles a kernel{child}"
                + ("" if busy else "; the GPU waits for the compiler"))
    elif rg.activity == GPU_BUSY_HOST_WAITING:
        text = (f"GPU {rg.gpu_index} {util} busy while {who}'s host thread waits in {point}: "
                + _spinning_kernel(rg)) + _spin_note(rg)
    elif rg.activity == GPU_IDLE_HOST_IDLE:
        text = (f"GPU {rg.gpu_index} idle ({util}) and {who}'s host thread waits in {point}: "
                "nothing runs here, so the block is upstream (another rank, a queue, a lock "
                "or I/O)") + _spin_note(rg)
    elif rg.activity == GPU_BUSY:
        text = f"GPU {rg.gpu_index} {util} busy: kernels run while {who} is in {point}"
    elif rg.activity == GPU_IDLE:
        cpu_text = f" ({cpu:.0f}% CPU)" if cpu is not None else ""
        text = (f"GPU {rg.gpu_index} idle ({util}) while {who}'s host runs on CPU{cpu_text} "
                "and launches no GPU work")
    else:
        text = f"GPU {rg.gpu_index}: utilisation unknown; {who} is in {point}"
    gpu = rg.gpu
    facts = []
    if gpu is not None and gpu.name:
        facts.append(gpu.name)
    if rg.used_memory is not None:
        facts.append(f"{who} holds {size(rg.used_memory, iec=True)}")
    if gpu is not None and gpu.memory_total:
        facts.append(f"memory {size(gpu.memory_used, iec=True)} of "
                     f"{size(gpu.memory_total, iec=True)} used")
    if gpu is not None and gpu.health:
        facts.append("; ".join(gpu.health))
    return text + (f" [{', '.join(facts)}]" if facts else "")


def gpu_evidence(subjects: Sequence[Process], processes: Sequence[Process],
                 hosts: Sequence[Host]) -> list[str]:
    """The per-rank GPU lines for the verdict's evidence (GPUs NVML read; none without it)."""
    seen = [rg for rg in rank_gpus(subjects, processes, hosts) if rg.gpu is not None]
    lines = [f"{short_who(rg.proc)} (PID {rg.proc.pid}): {evidence_line(rg)}"
             for rg in seen[:EVIDENCE_MAX_RANKS]]
    if len(seen) > EVIDENCE_MAX_RANKS:
        lines.append(f"... and {len(seen) - EVIDENCE_MAX_RANKS} more ranks on GPUs")
    return lines


def _ranks_text(items: Sequence[RankGpu]) -> str:
    procs = {rg.proc.key: rg.proc for rg in items}
    ranked = [p for p in procs.values() if p.rank is not None and p.rank.key is not None]
    if len(ranked) == len(procs):
        keys = sorted({p.rank.key for p in ranked if p.rank is not None and p.rank.key is not None})
        return ("rank " if len(keys) == 1 else "ranks ") + compact_ranks(keys)
    pids = sorted(pid for _, pid in procs)
    return ("PID " if len(pids) == 1 else "PIDs ") + ", ".join(map(str, pids))


FACTS_MAX_RANKS: Final = 64


def _facts(items: Sequence[RankGpu]) -> dict[str, object]:
    """The numbers behind a finding, for the first FACTS_MAX_RANKS ranks (and how many)."""
    total = len(items)
    items = items[:FACTS_MAX_RANKS]
    return {
        "count": total,
        "ranks": {
            str(rg.proc.rank.key if rg.proc.rank is not None and rg.proc.rank.key is not None
                else rg.proc.pid): {
                "pid": rg.proc.pid, "gpu": rg.gpu_index,
                "utilization": (sum(_samples(rg.gpu)) / len(_samples(rg.gpu))
                                if _samples(rg.gpu) else None),
                "utilization_samples": list(_samples(rg.gpu)),
                "used_memory": rg.used_memory,
                "host_cpu_percent": rg.proc.cpu_percent,
                "category": str(rg.category), "wait_point": rg.wait_point,
                "compilers": [p.pid for p in rg.compilers],
                "kernel": (rg.proc.kernels.main.name
                           if rg.proc.kernels is not None and rg.proc.kernels.main else None),
            }
            for rg in items
        }
    }


def gpu_findings(snap: Snapshot) -> list[Finding]:
    """GPU utilisation set against each rank's host thread, one finding per kind of story."""
    items = [rg for rg in rank_gpus(snap.subjects, snap.processes, snap.hosts)
             if rg.gpu is not None]
    findings: list[Finding] = []
    compiling = [rg for rg in items
                 if rg.category is Category.JIT_COMPILE or (rg.compilers
                                                             and rg.activity != GPU_BUSY)]
    shown = {id(rg) for rg in compiling}
    spinning = [rg for rg in items if rg.activity == GPU_BUSY_HOST_WAITING
                and id(rg) not in shown]
    upstream = [rg for rg in items if rg.activity == GPU_IDLE_HOST_IDLE
                and id(rg) not in shown]
    if spinning:
        if len(spinning) == 1:
            message = evidence_line(spinning[0]).split(" [", 1)[0] + "."
        else:
            indices = sorted({rg.gpu_index for rg in spinning})
            gpus = (f"GPU {indices[0]} is" if len(indices) == 1
                    else f"GPUs {', '.join(map(str, indices))} are")
            points = ", ".join(sorted({rg.wait_point or str(rg.category) for rg in spinning}))
            named = sorted({kernel_text(k) for rg in spinning
                            if rg.proc.kernels is not None and (k := rg.proc.kernels.main)})
            what = ("the kernels running are " + "; ".join(named[:3]) + " (cuda-gdb)"
                    if named else "kernels are spinning (NCCL or custom all-reduce waiting "
                    "for a peer, or a long kernel)")
            message = f"{gpus} busy while {_ranks_text(spinning)} wait ({points}): {what}."
        unread = [rg for rg in spinning if rg.proc.kernels is None]
        if unread:
            message += (" `hangscope dump --kernels` would name the kernel (cuda-gdb; it pauses "
                        "each such rank for seconds).")
        notes = sorted({rg.proc.kernels.note for rg in spinning if rg.proc.kernels is not None
                        and rg.proc.kernels.note and rg.proc.kernels.status != ke.READ})
        if notes:
            message += " " + " ".join(notes[:3])
        findings.append(Finding("gpu.spinning", Severity.WARNING, message, _facts(spinning)))
    if compiling:
        message = ("; ".join(f"{short_who(rg.proc)}: " + evidence_line(rg).split(" [", 1)[0]
                             for rg in compiling[:4]) + ".")
        findings.append(Finding("gpu.compiling", Severity.INFO, message, _facts(compiling)))
    if upstream:
        gpus = ", ".join(sorted({str(rg.gpu_index) for rg in upstream}))
        points = ", ".join(sorted({rg.wait_point or str(rg.category) for rg in upstream}))
        message = (f"GPU {gpus} idle while {_ranks_text(upstream)} "
                   f"{'waits' if len({rg.proc.pid for rg in upstream}) == 1 else 'wait'} "
                   f"({points}): nothing runs there, so the block is upstream (another rank, a "
                   "queue, a lock or I/O).")
        findings.append(Finding("gpu.idle", Severity.INFO, message, _facts(upstream)))
    for host in snap.hosts:
        for gpu in host.gpus:
            if gpu.health:
                findings.append(Finding(
                    "gpu.health", Severity.WARNING,
                    f"GPU {gpu.index} ({gpu.name or '?'}) on {host.name}: "
                    f"{'; '.join(gpu.health)}.",
                    {"gpu": gpu.index, "health": list(gpu.health)}))
    return findings
