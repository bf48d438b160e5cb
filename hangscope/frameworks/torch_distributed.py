"""torch.distributed: torchrun / ``python -m torch.distributed.run`` / ``.launch`` (its
elastic agent is the launcher; ranks carry RANK, LOCAL_RANK, WORLD_SIZE and
TORCHELASTIC_RUN_ID), ``mp.spawn`` (ranks numbered in the child, not in its environment), DDP
(the reducer's all_reduce runs from autograd's threads during ``backward``), and the threads a
process group starts (gloo's ``pt_gloo``/``gloo_*``, ProcessGroupNCCL's ``pt_nccl_*``)."""

from __future__ import annotations

from hangscope.frameworks import Framework

#: The environment torchelastic gives every rank it starts.
RANK_ENV = ("RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")
#: torch's own source directory for everything distributed.
SOURCE = "torch/distributed/"

FRAMEWORK = Framework(
    name="torchrun",
    launches_ranks=True,
    job_words=("torch.distributed.run", "torchrun", "torch.distributed.launch"),
    launchers=("torchrun",),
    thread_names=("pt_gloo", "gloo_", "pt_nccl"),
)
