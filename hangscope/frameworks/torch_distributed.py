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
from hangscope.model import Frame

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
    thread_names=("pt_gloo", "gloo_", "pt_nccl"),
    # torchelastic's agent: the rendezvous keep-alive beat (``_PeriodicTimer`` threads, waiting
    # in Event.wait between beats for the life of the agent).
    helper_threads=("RendezvousKeepAliveTimer", "PeriodicTimer"),
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


def _in(frames: Sequence[Frame], places: Sequence[tuple[str, str]]) -> bool:
    """A Python frame of ``frames`` is one of ``places``: (last name, path part)."""
    return any(not f.native and frame_at(f.name, f.file, places) for f in frames)


def rpc_handler_calls(thread_name: str | None, frames: Sequence[Frame]) -> bool:
    """A thread of the RPC agent's pool running a request's function that waits in a nested
    RPC call (``rpc_sync`` inside a handler): the thread is held until the reply comes."""
    return ((thread_name or "").startswith(RPC_POOL_THREAD) and _in(frames, (RPC_HANDLER,))
            and _in(frames, RPC_CALLS))


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
