"""Real GPU hangs for hangscope's GPU validation (``demo/gpu/validate.py``).

Run as a script, never imported by hangscope itself (it needs torch and a GPU)::

    python demo/gpu/hangs.py launch MODE [--world N] [--ranks N]

``launch`` plays torchrun: it starts ``--ranks`` rank processes (default 1) of a job of
``--world`` ranks with RANK / LOCAL_RANK / WORLD_SIZE in their environment, and waits on them.
A world larger than the ranks started is a job whose other ranks never came up.

Each rank appends ``"<pid> <what>"`` to the file named by HANGSCOPE_DEMO_READY right before it
enters its hanging call; a slow compiler (``ptxas_wrapper.sh``) writes its own line once it
stalls. The modes (each a hang seen in the field, docs/gpu.md):

- ``sync``       torch.cuda.synchronize() behind a kernel that spins for an hour
- ``launch``     a kernel launch blocked behind that kernel (``(x * 2).item()``)
- ``capture``    an SGLang-shaped CudaGraphRunner blocked inside torch.cuda.graph(...)
- ``capture_jit`` the same runner compiling a Triton kernel inside capture (slow ptxas)
- ``nccl_init``  init_process_group of a 2-rank NCCL job whose rank 1 never starts
- ``nccl_comm``  NCCL communicator creation (eager, device_id) with a rank 1 that joined the
                 store but never creates its communicator
- ``pynccl``     vLLM-style PyNcclCommunicator: ncclCommInitRank for 2 ranks, rank 1 missing
- ``custom_ar``  vLLM-style custom all-reduce: the kernel spins, the next launch blocks
- ``triton``     a Triton JIT compile in progress (slow ptxas child)
- ``inductor``   torch.compile compiling its Triton kernels (slow ptxas in the compile pool)
- ``idle``       a CUDA process that waits on an Event (GPU idle, host idle)
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # the SGLang/vLLM-shaped modules beside this file

READY_ENV = "HANGSCOPE_DEMO_READY"
SPIN_CYCLES = int(2e9 * 3600)  # ~1 h of GPU spinning at ~2 GHz


def ready(what: str) -> None:
    """Say "this process is about to hang" (appended, so several processes can share a file)."""
    path = os.environ.get(READY_ENV)
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {what}\n")
            f.flush()
            os.fsync(f.fileno())


def forever() -> None:
    threading.Event().wait()


# --- the hangs -------------------------------------------------------------------------------


def wait_for_gpu() -> None:
    import torch

    torch.ones(1, device="cuda")
    torch.cuda._sleep(SPIN_CYCLES)
    ready("sync")
    torch.cuda.synchronize()


def read_result() -> float:
    import torch

    x = torch.ones(1, device="cuda")
    torch.cuda._sleep(SPIN_CYCLES)
    ready("launch")
    return (x * 2).item()


def capture_blocked() -> None:
    import torch
    from cuda_graph_runner import CudaGraphRunner

    peer = threading.Event()  # a peer that never answers while the graph is being captured
    x = torch.randn(256, 256, device="cuda")

    def forward(bs: int) -> object:
        y = x[:bs] @ x
        if torch.cuda.is_current_stream_capturing():
            ready("capture")
            peer.wait()
        return y

    CudaGraphRunner(forward, batch_sizes=(8,)).capture()


def capture_jit() -> None:
    import torch
    import triton
    import triton.language as tl
    from cuda_graph_runner import CudaGraphRunner

    @triton.jit
    def scale(X, N: tl.constexpr, C: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(X + i, tl.load(X + i) * C)

    x = torch.ones(1024, device="cuda")

    def forward(bs: int) -> object:
        y = x * 2
        if torch.cuda.is_current_stream_capturing():
            scale[(1,)](x, 1024, bs)  # first call: compiled inside capture (ptxas is slow)
        return y

    CudaGraphRunner(forward, batch_sizes=(4,)).capture()


def _master() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29555")


def nccl_init(rank: int, world: int) -> None:
    import torch
    import torch.distributed as dist

    _master()
    torch.cuda.set_device(0)
    torch.ones(1, device="cuda")
    ready("nccl_init")
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(hours=1))
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()


def nccl_comm(rank: int, world: int) -> None:
    """Rank 0 creates its NCCL communicator eagerly; rank 1 joined the store and stopped."""
    import torch
    import torch.distributed as dist

    _master()
    if rank != 0:
        # Joins the TCPStore rendezvous (so rank 0 gets past it), then never creates a
        # communicator: a rank stuck before its first collective.
        from torch.distributed import TCPStore

        store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                         is_master=False, timeout=datetime.timedelta(hours=1))
        store.add(f"hangscope_peer_{rank}", 1)
        ready("nccl_comm_peer")
        forever()
        return
    torch.cuda.set_device(0)
    torch.ones(1, device="cuda")
    ready("nccl_comm")
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(hours=1),
                            device_id=torch.device("cuda", 0))
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()


def pynccl(rank: int, world: int) -> None:
    import torch
    from pynccl import PyNcclCommunicator

    torch.cuda.set_device(0)
    torch.ones(1, device="cuda")
    ready("pynccl")
    PyNcclCommunicator(rank=rank, world_size=world, device=torch.device("cuda", 0))


def custom_ar() -> None:
    import torch
    from custom_all_reduce import CustomAllreduce

    comm = CustomAllreduce(world_size=1, rank=0)
    hidden = torch.ones(4096, device="cuda")
    for layer in range(10_000):  # a forward pass: one all-reduce per layer
        if layer == 0:
            ready("custom_ar")
        hidden = comm.custom_all_reduce(hidden)


def triton_loop() -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def k(X, N: tl.constexpr, C: tl.constexpr):
        i = tl.arange(0, N)
        x = tl.load(X + i)
        for _ in tl.static_range(64):
            x = tl.sin(x) * C + tl.cos(x)
        tl.store(X + i, x)

    x = torch.zeros(1024, device="cuda")
    c = 0
    while True:
        c += 1
        k[(1,)](x, 1024, c)


def inductor() -> None:
    import torch

    @torch.compile
    def gelu_mlp(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ w).sin() * 3 + x.cos()

    x = torch.randn(512, 512, device="cuda")
    gelu_mlp(x, x)


def cpu_lock() -> None:
    """No GPU at all: the validation harness's self-test (tests/test_gpu.py)."""
    ready("cpu_lock")
    forever()


def idle() -> None:
    import torch

    torch.ones(1, device="cuda")
    ready("idle")
    forever()


# --- the launcher ----------------------------------------------------------------------------

MODES = {
    "sync": wait_for_gpu, "launch": read_result, "capture": capture_blocked,
    "capture_jit": capture_jit, "custom_ar": custom_ar, "triton": triton_loop,
    "inductor": inductor, "idle": idle, "cpu_lock": cpu_lock,
}
RANKED = {"nccl_init": nccl_init, "nccl_comm": nccl_comm, "pynccl": pynccl}


def run_rank(mode: str) -> None:
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if mode in RANKED:
        RANKED[mode](rank, world)
    else:
        MODES[mode]()


def launch(mode: str, world: int, ranks: int) -> int:
    """Start ``ranks`` ranks of a ``world``-rank job, like torchrun, and wait for them."""
    children = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world))
        children.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "rank",
                                          mode], env=env))

    def stop(_sig: int, _frame: object) -> None:
        for child in children:
            child.kill()
        sys.exit(1)

    signal.signal(signal.SIGTERM, stop)
    codes = [child.wait() for child in children]
    return max(codes, default=0)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "rank":
        run_rank(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "launch":
        mode = argv[1]
        world = int(argv[argv.index("--world") + 1]) if "--world" in argv else 1
        ranks = int(argv[argv.index("--ranks") + 1]) if "--ranks" in argv else 1
        if mode not in MODES and mode not in RANKED:
            print(f"unknown mode {mode!r}; modes: {', '.join([*MODES, *RANKED])}",
                  file=sys.stderr)
            return 2
        return launch(mode, world, ranks)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
