"""Kernel evidence: the CUDA kernels running on a rank's GPU, as ``cuda-gdb`` names them.

Pure, frozen data written by the sampler for ``hangscope dump --kernels`` (collect/cudagdb.py
runs ``cuda-gdb -batch -p PID -ex "info cuda kernels" -ex detach``) and read by the GPU
evidence (analyze/evidence/gpu.py) and the rank table. Like model/nccl.py, no ``from __future__
import
annotations``: field types are real objects, so model/serialize.py's generic reader resolves them.
Definitions in dependency order.
"""

import re
from dataclasses import dataclass

# What reading one rank's kernels came to (KernelRead.status).
READ = "read"
NO_KERNELS = "no_kernels"  # cuda-gdb attached and saw no kernel running
NO_CUDA_GDB = "no_cuda_gdb"
REFUSED = "refused"  # the attach was refused (ptrace permission, another tracer)
TIMEOUT = "timeout"
FAILED = "failed"
NOT_ASKED = "not_asked"  # the rank was not stuck with a spinning GPU: left alone


@dataclass(frozen=True)
class CudaKernel:
    """One row of ``info cuda kernels``."""

    name: str  # the invocation as cuda-gdb prints it, arguments cut
    short: str  # shortened as stacks are: no namespaces, templates or arguments
    device: int | None = None
    grid_id: int | None = None
    status: str | None = None  # Active, ...
    grid: tuple[int, ...] = ()  # GridDim
    block: tuple[int, ...] = ()  # BlockDim
    sms: int | None = None  # SMs the kernel occupies (bits set in the SMs mask)
    sm_mask: str | None = None
    collective: str | None = None  # an NCCL kernel's collective: all_reduce, all_gather, ...
    focus: bool = False  # the row cuda-gdb marked with '*'


@dataclass(frozen=True)
class KernelRead:
    """The kernels of one rank, or why they could not be read (``note`` says so, with a fix)."""

    pid: int
    status: str
    kernels: tuple[CudaKernel, ...] = ()
    note: str | None = None
    elapsed_s: float | None = None  # how long the rank was held by cuda-gdb
    resumed: bool = False  # hangscope found it stopped afterwards and sent SIGCONT
    state_after: str | None = None  # /proc/PID/stat's state once cuda-gdb was done
    # Children the attach left behind as zombies (the CUDA driver's NvDebugAgent): PIDs
    left_zombies: tuple[int, ...] = ()

    @property
    def main(self) -> CudaKernel | None:
        """The kernel to name: cuda-gdb's focus, else the first active one, else the first."""
        for kernel in self.kernels:
            if kernel.focus:
                return kernel
        active = [k for k in self.kernels if (k.status or "").lower() == "active"]
        return (active or list(self.kernels) or [None])[0]


# ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_AllGather_RING_LL_Sum_int8_t: the
# collective is the word after the prefix.
_NCCL = re.compile(r"\bnccl(?:Dev)?(?:Kernel|Func)_([A-Za-z]+)")
_NCCL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter":
             "reduce_scatter", "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv":
             "send/recv", "Send": "send", "Recv": "recv", "AllToAll": "all_to_all",
             "Gather": "gather", "Scatter": "scatter"}


def nccl_collective(name: str) -> str | None:
    """The collective an NCCL device kernel runs (``ncclDevKernel_AllReduce_...``), else None."""
    found = _NCCL.search(name)
    return _NCCL_OPS.get(found.group(1), found.group(1)) if found else None


def _cut(text: str, opening: str, closing: str) -> str:
    """``text`` without its bracketed parts (nested), keeping ``(anonymous namespace)``."""
    out, depth = [], 0
    i = 0
    while i < len(text):
        if depth == 0 and text.startswith("(anonymous namespace)", i):
            out.append("(anonymous namespace)")
            i += len("(anonymous namespace)")
            continue
        ch = text[i]
        if ch == opening:
            depth += 1
        elif ch == closing and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
        i += 1
    return "".join(out)


def shorten(name: str) -> str:
    """A kernel name as a user reads it: the function, without namespaces, templates or
    arguments (``at::cuda::(anonymous namespace)::spin_kernel()`` -> ``spin_kernel``), the way
    stacks are shortened; NCCL's kernels keep their whole name, which says the collective."""
    bare = _cut(_cut(name, "(", ")"), "<", ">").strip()
    bare = bare.rsplit("::", 1)[-1].strip()
    return bare or name


def kernel_text(kernel: CudaKernel) -> str:
    """``ncclDevKernel_AllReduce_Sum_f32_RING_LL (all_reduce), grid (2,1,1) block (288,1,1),
    2 SMs``: one kernel, as the GPU line says it."""
    coll = f" ({kernel.collective})" if kernel.collective else ""
    dims = []
    if kernel.grid:
        dims.append("grid (" + ",".join(map(str, kernel.grid)) + ")")
    if kernel.block:
        dims.append("block (" + ",".join(map(str, kernel.block)) + ")")
    if kernel.sms is not None:
        dims.append(f"{kernel.sms} SM{'s' if kernel.sms != 1 else ''}")
    return kernel.short + coll + (", " + " ".join(dims[:2]) if dims[:2] else "") + (
        f", {dims[2]}" if len(dims) > 2 else "")
