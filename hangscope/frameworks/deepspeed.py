"""DeepSpeed: the ``deepspeed`` launcher (its runner starts ``deepspeed.launcher.launch`` on each
node, which starts the ranks with RANK/LOCAL_RANK like torchrun and ``--local_rank=N``), its
communication wrappers (``deepspeed.comm``: plumbing, so a collective's call site is the
program's line that called into DeepSpeed), and ZeRO-3's parameter all_gather, started without
waiting and waited for through DeepSpeed's own handles (no torch.distributed frame names it)."""

from __future__ import annotations

from hangscope.frameworks import Framework

_PARTITION = "deepspeed/runtime/zero/partition_parameters.py"

FRAMEWORK = Framework(
    name="deepspeed",
    launches_ranks=True,
    job_words=("deepspeed",),
    launchers=("deepspeed",),
    library_files=("deepspeed/",),
    collectives=(
        ("AllGatherHandle.wait", _PARTITION, "all_gather"),
        ("AllGatherCoalescedHandle.wait", _PARTITION, "all_gather"),
        ("MultipleAllGatherHandles.wait", _PARTITION, "all_gather"),
        ("AllReduceCoalescedHandle.wait", _PARTITION, "all_reduce"),
    ),
)
