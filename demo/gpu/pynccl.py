"""A vLLM-shaped PyNcclCommunicator (``vllm/distributed/device_communicators/pynccl.py``).

vLLM and SGLang drive NCCL through ctypes, so their stacks show no torch.distributed frame:
``PyNcclCommunicator.__init__`` -> ``NCCLLibrary.ncclCommInitRank`` -> ``ncclCommInitRank``
in libnccl. With a rank missing, ``ncclCommInitRank`` never returns (vllm #58290, #12292).
"""

from __future__ import annotations

from pynccl_wrapper import NCCLLibrary


class PyNcclCommunicator:
    def __init__(self, rank: int, world_size: int, device) -> None:
        import torch

        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.nccl = NCCLLibrary()
        # vLLM broadcasts rank 0's id over a CPU group; rank 1 never arrives, so it does not
        # matter that only rank 0 has it here.
        self.unique_id = self.nccl.ncclGetUniqueId()
        with torch.cuda.device(device):
            self.comm = self.nccl.ncclCommInitRank(self.world_size, self.unique_id, self.rank)
