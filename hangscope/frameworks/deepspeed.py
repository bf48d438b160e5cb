"""DeepSpeed: the ``deepspeed`` launcher starts its ranks with RANK/LOCAL_RANK like torchrun."""

from __future__ import annotations

from hangscope.frameworks import Framework

FRAMEWORK = Framework(
    name="deepspeed",
    launches_ranks=True,
    job_words=("deepspeed",),
    launchers=("deepspeed",),
)
