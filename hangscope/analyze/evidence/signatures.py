"""The signature table: one row per known way a thread can be blocked, ordered.

Rules are data. The classifier tries rows in order and the first row that matches a thread
wins, so precedence is the order of this table:

- GIL wait first: ``take_gil`` at the top of the native stack beats whatever lies below it.
- Communicator init before collectives: NCCL creates communicators lazily *under* the first
  collective (pytorch #131781), and NCCL init polls with ``usleep`` (nccl #1774).
- JIT compile before sync and lock: autotune ends in ``synchronize`` and FlashInfer's JIT holds
  a ``filelock`` (sglang #5034).
- Collective before CUDA sync/launch: an NCCL launch blocked in ``cudaLaunchKernel`` is still the
  collective (nccl #750).
- Generic waits (IPC, lock, sleep) last, and only at the leaf of the stack.

Adding a signature: add a row here and a test in tests/test_classify.py built from a real
stack (docs/signatures.md says how).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangscope.frameworks import (
    COLLECTIVES,
    HELPER_TARGETS,
    HELPER_THREADS,
    LIBRARY_FILES,
    POLLED_WAITS,
    POOL_WORKERS,
    frames_pattern,
)
from hangscope.frameworks.torch_distributed import REDUCER_WAIT
from hangscope.model import Category, Frame

# Where a pattern is looked for in a thread's stack.
ANYWHERE = "anywhere"  # any frame
LEAF = "leaf"  # the innermost frames, up to and including the first Python frame


@dataclass(frozen=True)
class Signature:
    """One row: what frames mean which category, and what to tell the user."""

    id: str
    category: Category
    python: re.Pattern[str] | None  # matched against "function (file)" of Python frames
    native: re.Pattern[str] | None  # matched against native symbol names
    scope: str
    hint: str
    op: str | None = None  # a fixed op; collectives read it from the matched frame


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_C10D = r"\((?:[^)]*/)?torch/distributed/(?:distributed_c10d|c10d_logger)\.py\)"

SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "gil", Category.GIL_WAIT, None,
        _re(r"\btake_gil\b|PyCOND_(?:TIMED)?WAIT|PyEval_(?:RestoreThread|AcquireThread)\b|"
            r"PyGILState_Ensure|gil_scoped_acquire"),
        LEAF, "Waiting to take the GIL: find the thread that owns it (owns_gil) and what it does."),
    Signature(
        "nccl_comm_init", Category.COMM_INIT,
        _re(r"^(?:\S+\.)?(?:init_process_group|rendezvous|_store_based_barrier|"
            r"_create_c10d_store|_env_rendezvous_handler|_tcp_rendezvous_handler|"
            r"init_model_parallel_group|initialize_model_parallel|new_group|"
            r"PyNcclCommunicator\.__init__|init_distributed_environment) |"
            # pynccl (vLLM/SGLang): NCCLLibrary.ncclCommInitRank via ctypes; without qualnames
            # (py-spy on Python < 3.11) the constructor is a bare __init__ in pynccl.py.
            r"^(?:\S+\.)?nccl(?:CommInitRank\w*|CommInitAll|CommSplit|GetUniqueId) |"
            r"^__init__ \((?:[^)]*/)?pynccl\.py\)"),
        _re(r"p?ncclCommInit(?:Rank|RankConfig|All)?\b|ncclCommSplit|bootstrap(?:AllGather|Init)|"
            r"NCCLComm::create|initNCCLComm|getNCCLComm|broadcastUniqueNCCLID|"
            r"TCPStore::(?:doWait|doGet|wait|get|TCPStore|waitForWorkers)|tcputil::(?:connect|recvBytes)"),
        ANYWHERE,
        "Stuck creating a communicator or in rendezvous: a peer rank never arrived "
        "(check that every rank started, MASTER_ADDR/PORT, and the network)."),
    Signature(
        "jit_compile", Category.JIT_COMPILE,
        _re(r"\((?:[^)]*/)?(?:triton/(?:compiler/compiler|backends/nvidia/compiler|runtime/jit|"
            r"runtime/autotuner|runtime/build)\.py|torch/_inductor/(?:compile_fx|graph|codecache|"
            r"async_compile|runtime/triton_heuristics)\.py|torch/_dynamo/(?:convert_frame)\.py|"
            r"flashinfer/jit/[^)]*|deep_gemm/jit[^)]*|torch/utils/cpp_extension\.py)\)|"
            r"^(?:\S+\.)?make_(?:ttir|ttgir|llir|ptx|cubin) "),
        _re(r"libtriton\.so|mlir::"),
        ANYWHERE,
        "Compiling a kernel (Triton/Inductor/FlashInfer JIT): a cold compile can outlast a "
        "collective timeout on the other ranks; a filelock here means JIT cache contention."),
    Signature(
        "collective", Category.COLLECTIVE,
        # torch 2.13 names the tensor forms all_gather_single / reduce_scatter_single
        # (FSDP2's unshard and reduce-scatter call them)
        _re(r"^(?:\S+\.)?(?:all_reduce|all_reduce_coalesced|all_gather|all_gather_into_tensor|"
            r"all_gather_single|all_gather_coalesced|all_gather_object|"
            r"reduce_scatter|reduce_scatter_tensor|reduce_scatter_single|broadcast|broadcast_object_list|barrier|"
            r"monitored_barrier|send|recv|isend|irecv|batch_isend_irecv|all_to_all|all_to_all_single|gather|"
            r"gather_object|scatter|scatter_object_list|reduce) " + _C10D + "|"
            r"^(?:\S+\.)?nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|"
            r"GroupEnd)\b"),
        _re(r"\bp?nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|"
            r"GroupEnd)\b|c10d::ProcessGroup(?:NCCL|Gloo)::(?:allreduce|allgather|"
            r"_allgather_base|allgather_into_tensor_coalesced|reduce_scatter|_reduce_scatter_base|"
            r"broadcast|barrier|send|recv|alltoall_base|alltoall|gather|scatter|reduce)\b|"
            # c10d's Work::wait: a thread waiting for an op it started without waiting
            # (``async_op=True``: DeepSpeed ZeRO-3's parameter all_gather, ``isend(...).wait()``)
            r"c10d::ProcessGroupGloo::\w*Work::wait|c10d::Work::wait\b|gloo::\w+"),
        ANYWHERE,
        "Waiting in a collective: it completes only when every rank of the group calls the "
        "same op; look for the rank that is elsewhere."),
    Signature(
        # A framework's own frames that stand for a collective of its ranks (frameworks/:
        # ``collectives``): DeepSpeed's handle on ZeRO-3's all_gather, Ray Train's report.
        "framework_collective", Category.COLLECTIVE, _re(frames_pattern(COLLECTIVES)), None,
        ANYWHERE,
        "Waiting in a collective of the framework's ranks: it completes only when every rank "
        "calls the same; look for the rank that is elsewhere."),
    Signature(
        # A framework's own wait that another of its processes ends on a schedule
        # (frameworks/: ``polled_waits``; Ray Train's report waits for the controller's poll):
        # a wait for the next turn, as a sleep is; its hint is the framework's own.
        "framework_poll", Category.SLEEP, _re(frames_pattern(POLLED_WAITS)), None, ANYWHERE,
        "Waiting for the framework's next poll."),
    Signature(
        # DDP's all_reduce runs inside ``backward``: the reducer launches each gradient bucket's
        # all_reduce from autograd's hooks (gloo runs it on its own work threads, which py-spy
        # cannot see) and the thread in autograd's engine waits for all of them at the end.
        "ddp_backward", Category.COLLECTIVE, None, _re(REDUCER_WAIT), ANYWHERE,
        "Waiting in DDP's gradient all_reduce at the end of backward: it completes only when "
        "every rank runs the same backward; look for the rank that is elsewhere (a skipped "
        "batch, an evaluation-only collective, a rank-0-only step).",
        op="all_reduce"),
    Signature(
        # vLLM/SGLang custom all-reduce: no NCCL frame; its kernel spins on peer flags, so the
        # launch after it (or the next sync) blocks with the GPU at 100% (sglang #31117).
        "custom_all_reduce", Category.COLLECTIVE,
        _re(r"\((?:[^)]*/)?(?:custom_all_reduce|quick_all_reduce)\.py\)|"
            r"^(?:\S+\.)?(?:custom_all_reduce|CustomAllreduce\.\w+|QuickAllReduce\.\w+) "),
        None, ANYWHERE,
        "Waiting in a custom all-reduce (vLLM/SGLang): its kernel spins on the GPU until every "
        "peer arrives (GPU 100% busy); find the rank that is elsewhere, or retry with "
        "--disable-custom-all-reduce.",
        op="custom_all_reduce"),
    Signature(
        "cuda_sync", Category.CUDA_SYNC,
        # Library frames only: a user function named item/tolist/cpu is not a sync (the real
        # Tensor.item is a C method; its native frame is _local_scalar_dense, matched below).
        _re(r"^(?:\S+\.)?synchronize \((?:[^)]*/)?torch/cuda/(?:__init__|streams)\.py\)"),
        _re(r"cu(?:Stream|Ctx|Event)Synchronize|cuda(?:Stream|Device|Event)Synchronize|"
            r"_local_scalar_dense|cudaMemcpy(?:Async)?\b|cuMemcpy\w*"),
        ANYWHERE,
        "The host waits for the GPU to finish (a spin-wait looks busy but is a wait): the "
        "kernel ahead of it is slow or stuck; a sync is usually the victim, not the cause."),
    Signature(
        "cuda_launch", Category.CUDA_LAUNCH, None,
        _re(r"\bcu(?:da)?LaunchKernel(?:Ex|ExC)?\b|cuLaunchCooperativeKernel"),
        ANYWHERE,
        "A kernel launch is blocked: the launch queue is full behind a kernel that does not "
        "finish (treat it like a sync)."),
    Signature(
        # filelock (any version: 3.x _api.py, 4.x _core/) polls with LOCK_NB and sleeps, so no
        # kernel wait shows; a blocking flock/fcntl lock shows as the libc call (and its wchan).
        "jit_lock", Category.LOCK,
        _re(r"\((?:[^)]*/)?filelock/[^)]*\)"),
        _re(r"^(?:__)?flock$|^fcntl_(?:flock|lockf)|^(?:__libc_)?fcntl(?:64)?$"), ANYWHERE,
        "Waiting for a file lock held by another process (/proc/locks names it): a long "
        "build in the holder, a stale lock (a killed run) or a lock on NFS keeps it held."),
    Signature(
        "ipc", Category.IPC_WAIT,
        _re(r"\((?:[^)]*/)?(?:zmq/sugar/(?:socket|poll)\.py|multiprocessing/(?:connection|queues|"
            r"managers|popen_fork|popen_spawn_posix)\.py|selectors\.py|socket\.py|"
            r"asyncio/(?:base_events|selector_events)\.py|subprocess\.py)\)|"
            r"\((?:[^)]*/)?shm_broadcast\.py\)|^(?:\S+\.)?(?:recv_pyobj|recv_multipart) "),
        _re(r"zmq_(?:poll|msg_recv)|zmq::(?:socket_base_t::recv|signaler_t::wait)|"
            r"\bepoll_wait\b|\b__?poll\b|\brecvfrom\b|\brecvmsg\b|\bwait4\b|\bwaitpid\b"),
        LEAF,
        "Waiting for another process (a pipe, queue, socket or child): the process it waits "
        "on is where to look."),
    Signature(
        "io", Category.IO,
        _re(r"safetensors|safe_open|\((?:[^)]*/)?torch/serialization\.py\)|weight_utils\.py"),
        None, LEAF, "Reading files (weights, checkpoints): slow storage or NFS."),
    Signature(
        "lock", Category.LOCK,
        _re(r"^(?:\S+\.)?(?:acquire|wait|join|_wait_for_tstate_lock|get) "
            r"\((?:[^)]*/)?(?:threading|queue)\.py\)"),
        _re(r"PyThread_acquire_lock(?:_timed)?|pthread_mutex_lock|__lll_lock_wait|futex_wait|"
            r"__new_sem_wait|\bsem_wait\b|pthread_cond_(?:timed)?wait|pthread_join"),
        LEAF, "Waiting on a lock or condition held by another thread."),
    Signature(
        "sleep", Category.SLEEP,
        _re(r"^(?:\S+\.)?sleep \((?:[^)]*/)?(?:time|asyncio/tasks)\.py\)"),
        _re(r"\bclock_nanosleep\b|\bnanosleep\b|\busleep\b|\btime_sleep\b|\bpysleep\b"),
        LEAF, "Sleeping: a polling loop or a back-off; look at what it polls for."),
)

# The engines' own capture code, keyed on the engine's package path (supporting evidence:
# sglang #1751, vllm #30044). A copy of these names outside the package does not count.
ENGINE_CAPTURE = (
    r"\((?:[^)]*/)?sglang/srt/model_executor/cuda_graph_runner\.py\)|"
    r"^(?:\S+\.)?(?:capture_model|_capture_cudagraphs|_warmup_and_capture) "
    r"\((?:[^)]*/)?vllm/[^)]*\)|\((?:[^)]*/)?vllm/compilation/cuda_graph\.py\)|"
    r"^(?:\S+\.)?graph_capture \((?:[^)]*/)?vllm/distributed/parallel_state\.py\)"
)

# Point-to-point ops: the classifier keeps them in Category.COLLECTIVE (op send / recv /
# batch_isend_irecv); is_p2p tells them apart, since a send completes with one peer only.
P2P_OPS = frozenset({"send", "recv", "batch_isend_irecv"})


def is_p2p(op: str | None) -> bool:
    """Whether a collective op is point-to-point (one peer) rather than group-wide."""
    return op in P2P_OPS


# Context labels: an outer label over whatever category the leaf gives.
CONTEXTS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        # Library frames only: torch's capture API (torch/cuda/graphs.py, at::cuda::CUDAGraph),
        # the driver's capture entry points, and the engines' capture code *in the engine's own
        # package*. A user function named capture_graph is not capture (the with-block of
        # torch.cuda.graph leaves no torch frame on the stack once __enter__ returned).
        "cuda_graph_capture",
        _re(r"\((?:[^)]*/)?torch/cuda/graphs\.py\)|CUDAGraph::capture_(?:begin|end)|"
            r"cu(?:da)?StreamBeginCapture|cu(?:da)?StreamEndCapture|cu(?:da)?GraphInstantiate|"
            + ENGINE_CAPTURE),
        "inside CUDA graph capture",
    ),
    (
        "shutdown",
        _re(r"^(?:\S+\.)?_shutdown \((?:[^)]*/)?threading\.py\)|"
            r"^(?:\S+\.)?destroy_process_group |ProcessGroupNCCL::abort"),
        "during shutdown",
    ),
)

# Threads that are always present and idle in a healthy process: context, not signal.
HELPER_THREAD_NAMES = _re(
    r"^(?:pt_nccl_\w+|pt_tcpstore\w*|tqdm_monitor|TMonitor|ZMQbg/.*|cuda-EvtHandlr|cuda\d+|"
    r"InductorSubproc|.*\(_read_thread\)|.*\(_monitor\)|.*\(_handle_workers\)|"
    r".*\(_handle_results\)|.*\(_handle_tasks\)|QueueFeederThread|.*\(_feed\)|"
    r".*\(_run_tracker\)|.*watchdog.*|.*heartbeat.*"
    # the frameworks' own helper threads (torchrun's rendezvous keep-alive timer)
    + "".join("|" + re.escape(prefix) + ".*" for prefix in HELPER_THREADS)
    + "".join(r"|.*\(" + re.escape(target) + r"\)" for target in HELPER_TARGETS) + ")$",
)
HELPER_THREAD_FRAMES = _re(
    r"\((?:[^)]*/)?(?:tqdm/_monitor\.py|torch/_inductor/compile_worker/(?:subproc_pool|timer)\.py|"
    r"multiprocessing/pool\.py|concurrent/futures/thread\.py|"
    # multiprocessing's fd-sharing server thread (torch's file_descriptor sharing strategy
    # starts one in every DataLoader worker): it waits in accept() for the life of the process
    r"multiprocessing/resource_sharer\.py|"
    r"torch/utils/data/_utils/pin_memory\.py|wandb/[^)]*)\)"
)
# The pools among those: their worker threads run the program's tasks.
POOL_WORKER_FRAMES = _re(
    r"\((?:[^)]*/)?(?:multiprocessing/pool\.py|concurrent/futures/thread\.py)\)")
# The frameworks' own pools' worker loops (AnyIO's), by function and file.
POOL_WORKER_LOOPS = _re(frames_pattern(POOL_WORKERS))


def pool_loop(frame: Frame) -> bool:
    """A pool's worker loop (a ThreadPoolExecutor's, a Pool's, a framework's: AnyIO's)."""
    return not frame.native and bool(POOL_WORKER_LOOPS.search(frame_text(frame)) or (
        frame.file and POOL_WORKER_FRAMES.search(f"({frame.file})")))


# Python files that are plumbing: the call site a user cares about is the first frame
# outside these (the line of *their* code that called into the blocking library).
PLUMBING_FILES = _re(
    r"(?:^|/)(?:torch/(?:distributed|cuda|_ops|_tensor|nn|utils|autograd|fx|optim|_library)/?|"
    r"threading\.py|queue\.py|multiprocessing/|selectors\.py|socket\.py|subprocess\.py|"
    r"http/client\.py|http/server\.py|socketserver\.py|urllib/|ssl\.py|"
    r"asyncio/|concurrent/|zmq/|filelock/|triton/|torch/_inductor/|torch/_dynamo/|"
    r"c10d_logger\.py|contextlib\.py|functools\.py|typing_extensions\.py|runpy\.py|"
    r"cmd\.py|pdb\.py|bdb\.py|"
    r"pynccl(?:_wrapper)?\.py|shm_broadcast\.py|time\.py|"
    r"(?:custom|quick)_all_reduce\.py|torch/_functorch/|torch/__init__\.py|"
    r"torch/_utils_internal\.py|torch/_compile\.py|torchinductor_[^/]*/|c[a-z0-9]{51}\.py$|"
    r"^<frozen importlib\._bootstrap(?:_external)?>$"
    # the frameworks' own code (Accelerate, Lightning): the user's line called into it
    + "".join("|" + re.escape(path) for path in LIBRARY_FILES) + ")"
)

#: Where a forked or spawned child's own code begins: frames outside this one (older, further
#: down the stack) are the parent's, inherited through fork() (``Process._bootstrap`` is called
#: by ``popen_fork``/``forkserver``/``spawn._main``; ``_execute_child`` is the parent's frame a
#: child of ``subprocess`` keeps until it execs).
FORK_BOUNDARY = _re(
    r"^(?:BaseProcess\.)?_bootstrap \((?:[^)]*/)?multiprocessing/process\.py\)|"
    r"^(?:Popen\.)?_execute_child \((?:[^)]*/)?subprocess\.py\)"
)

# Op names normalised from Python functions and native symbols.
OP_ALIASES = {
    "allreduce": "all_reduce", "all_reduce": "all_reduce", "ncclallreduce": "all_reduce",
    "allgather": "all_gather", "all_gather": "all_gather", "_allgather_base": "all_gather",
    "all_gather_into_tensor": "all_gather", "ncclallgather": "all_gather",
    "all_gather_single": "all_gather", "all_gather_coalesced": "all_gather",
    "reduce_scatter_single": "reduce_scatter", "all_reduce_coalesced": "all_reduce",
    "all_gather_object": "all_gather_object", "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "ncclreducescatter": "reduce_scatter",
    "broadcast": "broadcast", "ncclbroadcast": "broadcast",
    # DDP's buffer (and first parameter) sync: c10d::broadcast_coalesced under its forward
    "broadcast_coalesced": "broadcast", "_distributed_broadcast_coalesced": "broadcast",
    "broadcast_object_list": "broadcast_object_list",
    "barrier": "barrier", "monitored_barrier": "barrier", "monitoredbarrier": "barrier",
    "send": "send", "isend": "send", "ncclsend": "send",
    "recv": "recv", "irecv": "recv", "ncclrecv": "recv",
    "batch_isend_irecv": "batch_isend_irecv",
    "all_to_all": "all_to_all", "all_to_all_single": "all_to_all", "alltoall": "all_to_all",
    "alltoall_base": "all_to_all", "ncclalltoall": "all_to_all",
    "gather": "gather", "gather_object": "gather", "scatter": "scatter",
    "scatter_object_list": "scatter", "reduce": "reduce", "ncclreduce": "reduce",
    "ncclgroupend": "group_end",
}

_GLOO_WORK = re.compile(r"ProcessGroupGloo::(?:Async)?(\w+?)(?:Coalesced)?Work\w*::")
_GLOO_ALGO = re.compile(r"gloo::(allreduce|allgather|allgatherv|broadcast|barrier|reduce_scatter|"
                        r"alltoall|gather|scatter|reduce)\b", re.IGNORECASE)


def op_from_name(name: str) -> str | None:
    """Normalise a collective op name: ``ncclAllReduce`` -> ``all_reduce``."""
    short = name.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
    short = re.sub(r"^p(?=nccl)", "", short)
    found = OP_ALIASES.get(short.lower())
    if found:
        return found
    gloo = _GLOO_WORK.search(name)
    if gloo:
        return OP_ALIASES.get(gloo.group(1).lower(), gloo.group(1).lower())
    algo = _GLOO_ALGO.search(name)
    if algo:
        value = algo.group(1).lower().rstrip("v")
        return OP_ALIASES.get(value, value)
    return None


def frame_text(frame: Frame) -> str:
    """How a Python frame is matched: ``function (path)``, as py-spy prints it."""
    return f"{frame.name} ({frame.file or ''})"


def _leaf(frames: Sequence[Frame]) -> Sequence[Frame]:
    """The innermost frames up to and including the first Python frame."""
    for i, frame in enumerate(frames):
        if not frame.native:
            return frames[: i + 1]
    return frames


def match_frame(sig: Signature, frames: Sequence[Frame]) -> Frame | None:
    """The frame of ``frames`` that ``sig`` matches, within its scope."""
    scope = frames if sig.scope == ANYWHERE else _leaf(frames)
    for frame in scope:
        if frame.native:
            if sig.native is not None and sig.native.search(frame.name):
                return frame
        elif sig.python is not None and sig.python.search(frame_text(frame)):
            return frame
    return None
