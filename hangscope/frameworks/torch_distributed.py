"""torch.distributed: torchrun / ``python -m torch.distributed.run`` / ``.launch`` (its
elastic agent is the launcher; ranks carry RANK, LOCAL_RANK, WORLD_SIZE and
TORCHELASTIC_RUN_ID), ``mp.spawn`` (ranks numbered in the child, not in its environment), DDP
(the reducer's all_reduce runs from autograd's threads during ``backward``), the threads a
process group starts (gloo's ``pt_gloo``/``gloo_*``, ProcessGroupNCCL's ``pt_nccl_*``), and the
agent's rendezvous keep-alive timer (a helper thread)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hangscope.frameworks import Framework, frame_at
from hangscope.model import Frame, Process

#: The environment torchelastic gives every rank it starts.
RANK_ENV = ("RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")
#: torch's own source directory for everything distributed.
SOURCE = "torch/distributed/"
#: DDP's reducer waiting for its gradient buckets' all_reduce at the end of ``backward`` (native
#: symbols): the thread that runs autograd's engine, which on CPU is the caller's own (gloo's
#: work threads run the all_reduce itself), waits here for every rank's gradients.
REDUCER_WAIT = (r"c10d::Reducer::(?:finalize_backward|all_reduce_bucket|run_comm_hook|"
                r"run_allreduce_hook|delay_all_reduce)\b")

FRAMEWORK = Framework(
    name="torchrun",
    launches_ranks=True,
    job_words=("torch.distributed.run", "torchrun", "torch.distributed.launch"),
    launchers=("torchrun",),
    # (a process group's threads; TensorPipe's, which only an RPC agent starts; the libuv
    # server thread of the TCPStore a rank hosts)
    thread_names=("pt_gloo", "gloo_", "pt_nccl", "TP_", "pt_tcpstore"),
    # torchelastic's agent: the rendezvous keep-alive beat (``_PeriodicTimer`` threads, waiting
    # in Event.wait between beats for the life of the agent).
    helper_threads=("RendezvousKeepAliveTimer", "PeriodicTimer"),
    # The TCPStore a rank hosts serves on its libuv thread (``pt_tcpstore_uv``): the store's
    # answers to every rank's polls (a rendezvous waiting for its workers polls its own store
    # every few ms) are no step of the job (blind round 31's 06 read them as rank 0 working).
    store_threads=("pt_tcpstore",),
    # The RPC agent's pool runs each request's function: a trainer whose loop is a request
    # (the parameter server's ``rpc_async(run_trainer)``) works there while its main thread
    # waits in ``rpc.shutdown``. (An idle pool thread has no stack: it is no candidate.)
    work_threads=("pt_thread_pool",),
    rank_tests=("get_rank", "rank", "local_rank", "global_rank"),
)


_REDUCER = re.compile(REDUCER_WAIT)
#: The elastic agent's rendezvous (torchrun ``--nnodes N``): it starts no rank until the agents
#: of enough nodes have joined.
AGENT_RENDEZVOUS = ("_rendezvous", "torch/distributed/elastic/agent/server/api.py")


#: torch.distributed.rpc: the agent's thread pool (c10d's ``ThreadPool``, ``num_worker_threads``
#: threads) runs each request's function, under ``_run_function``; ``rpc_sync`` (or a future's
#: ``wait``) inside it blocks that thread until the reply comes.
RPC_POOL_THREAD = "pt_thread_pool"
RPC_HANDLER = ("_run_function", "torch/distributed/rpc/internal.py")
RPC_CALLS = (("rpc_sync", "torch/distributed/rpc/api.py"),)
#: The files those frames run in: a snapshot none of whose stacks runs one has no RPC to read
#: (asked once per distinct stack, not of each of 131,072 ranks' threads by name).
RPC_HANDLER_FILE = RPC_HANDLER[1]
RPC_CALL_FILE = RPC_CALLS[0][1]


#: Waits on the futures an RPC returns (``rpc_async(...).wait()``, ``torch.futures.wait_all``).
RPC_FUTURE_WAITS = (("wait", "torch/futures/__init__.py"),
                    ("wait_all", "torch/futures/__init__.py"))
#: Threads only an RPC agent starts: TensorPipe's (its transports' event loops).
RPC_AGENT_THREAD = "TP_"


def rpc_agents(processes: Sequence[Process]) -> list[Process]:
    """The live processes that run a torch.distributed.rpc agent: its pool and TensorPipe's
    threads."""
    def agent(proc: Process) -> bool:
        names = [t.name or "" for t in proc.threads]
        return (any(n.startswith(RPC_POOL_THREAD) for n in names)
                and any(n.startswith(RPC_AGENT_THREAD) for n in names))

    return [p for p in processes if not p.is_exited and agent(p)]


def rpc_handler(frames: Sequence[Frame]) -> bool:
    """A stack that runs a request's function for another worker (``_run_function``)."""
    return _in(frames, (RPC_HANDLER,))


def rpc_serving(thread_name: str | None, frames: Sequence[Frame]) -> bool:
    """A thread of the RPC agent's pool that runs a request's function now."""
    return (thread_name or "").startswith(RPC_POOL_THREAD) and rpc_handler(frames)


def rpc_call(frames: Sequence[Frame]) -> bool:
    """A stack blocked in a synchronous RPC (``rpc_sync``)."""
    return _in(frames, RPC_CALLS)


def rpc_future_wait(frames: Sequence[Frame]) -> bool:
    """A stack that waits on RPC futures (``Future.wait``, ``wait_all``)."""
    return _in(frames, RPC_FUTURE_WAITS)


def _in(frames: Sequence[Frame], places: Sequence[tuple[str, str]]) -> bool:
    """A Python frame of ``frames`` is one of ``places``: (last name, path part)."""
    return any(not f.native and frame_at(f.name, f.file, places) for f in frames)


def rpc_handler_calls(thread_name: str | None, frames: Sequence[Frame]) -> bool:
    """A thread of the RPC agent's pool running a request's function that waits in a nested
    RPC call (``rpc_sync`` inside a handler): the thread is held until the reply comes."""
    return rpc_serving(thread_name, frames) and rpc_call(frames)


#: The threads torch's gloo backend starts in each member of a process group (c10d's work
#: loop, gloo's TCP event loop): a process with them runs a gloo group, under any launcher
#: (torchrun's ranks, Ray actors in a ``ray.util.collective`` group).
GLOO_THREADS = frozenset({"pt_gloo_runloop", "gloo_tcp_loop"})


#: FSDP's own code (FSDP2's ``fully_shard``, FSDP1): its collectives run from its hooks.
FSDP_SOURCE = "torch/distributed/fsdp/"


def in_fsdp(frames: Sequence[Frame]) -> bool:
    """A stack inside FSDP's own code: a collective of its hooks (unshard, reduce-scatter)."""
    return any(not f.native and FSDP_SOURCE in (f.file or "") for f in frames)


def in_agent_rendezvous(frames: Sequence[Frame]) -> bool:
    """A stack inside the elastic agent's rendezvous, waiting for the other nodes' agents."""
    return _in(frames, (AGENT_RENDEZVOUS,))


def in_ddp_backward(frames: Sequence[Frame]) -> bool:
    """A stack waiting in DDP's reducer for its gradient all_reduce (its native frames)."""
    return any(f.native and _REDUCER.search(f.name) for f in frames)


#: Collectives a wrapper issues on its own inside a call the program makes: DDP's forward
#: broadcasts the module's buffers from rank 0 first (``broadcast_buffers=True``, the
#: default), so a forward on some ranks only waits for the others (pytorch#54059). (last
#: name, path part, what to do).
IMPLICIT_COLLECTIVES = (
    ("_sync_buffers", "torch/nn/parallel/distributed.py",
     "DistributedDataParallel's forward broadcasts the module's buffers to every rank before "
     "it runs (broadcast_buffers=True): a forward on some ranks only goes through the wrapped "
     "module (model.module), not the DDP wrapper"),
)


def implicit_collective(frames: Sequence[Frame]) -> str | None:
    """What to do where ``frames`` wait in a collective a wrapper issued on its own."""
    return next((advice for name, path, advice in IMPLICIT_COLLECTIVES
                 if _in(frames, ((name, path),))), None)


#: ``init_process_group``: its arguments name the rank and the world size the program asked
#: for (``mp.spawn`` jobs pass them, no environment says them), and a rank still inside it
#: waits in the rendezvous for the others.
INIT_GROUP = (("init_process_group", "torch/distributed/distributed_c10d.py"),)
#: The rendezvous's store creation: its ``hostname`` and ``port`` arguments are where this rank
#: looks for the job's TCPStore (the rank that hosts it listens there).
STORE_CREATE = (("_create_c10d_store", "torch/distributed/rendezvous.py"),)


def in_init_group(frames: Sequence[Frame]) -> bool:
    """A stack inside ``init_process_group`` (a rendezvous, a store, a group's first connect)."""
    return _in(frames, INIT_GROUP)

