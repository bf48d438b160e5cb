"""A vLLM/SGLang-shaped custom all-reduce (``device_communicators/custom_all_reduce.py``).

The real one launches one kernel that writes this rank's data to its peers' IPC buffers and
then spins on their flags: with a peer missing it spins forever, the GPU shows 100% busy, and
the host goes on launching until a launch (or the next sync) blocks. Here the spinning kernel
is ``torch.cuda._sleep`` on one GPU; the host-side frames are the ones vLLM and SGLang show.
"""

from __future__ import annotations

SPIN_CYCLES = int(2e9 * 3600)


class CustomAllreduce:
    def __init__(self, world_size: int, rank: int) -> None:
        self.world_size = world_size
        self.rank = rank

    def all_reduce(self, inp, out) -> None:
        import torch

        # ops.all_reduce(self._ptr, inp, out, ...): the barrier kernel waits for every peer.
        torch.cuda._sleep(SPIN_CYCLES)
        out.copy_(inp)

    def custom_all_reduce(self, inp):
        import torch

        out = torch.empty_like(inp)
        self.all_reduce(inp, out)
        return out
