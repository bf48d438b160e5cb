"""A vLLM-shaped ctypes binding of NCCL (vLLM's ``device_communicators/pynccl_wrapper.py``).

It loads the libnccl that torch already loaded (found in /proc/self/maps), so no path is
guessed, and exposes the calls as Python methods named like NCCL's, as vLLM does.
"""

from __future__ import annotations

import ctypes

ncclResult_t = ctypes.c_int
ncclComm_t = ctypes.c_void_p


class ncclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def _loaded_nccl() -> str:
    import torch  # noqa: F401  (loads libnccl through libtorch_cuda)

    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "libnccl.so" in path:
                return path
    return "libnccl.so.2"


class NCCLLibrary:
    def __init__(self, path: str | None = None) -> None:
        self.lib = ctypes.CDLL(path or _loaded_nccl())
        self.lib.ncclGetUniqueId.restype = ncclResult_t
        self.lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(ncclUniqueId)]
        self.lib.ncclCommInitRank.restype = ncclResult_t
        self.lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ncclComm_t), ctypes.c_int,
                                              ncclUniqueId, ctypes.c_int]
        self.lib.ncclGetErrorString.restype = ctypes.c_char_p
        self.lib.ncclGetErrorString.argtypes = [ncclResult_t]

    def _check(self, result: int) -> None:
        if result != 0:
            raise RuntimeError(f"NCCL error: {self.lib.ncclGetErrorString(result).decode()}")

    def ncclGetUniqueId(self) -> ncclUniqueId:
        unique_id = ncclUniqueId()
        self._check(self.lib.ncclGetUniqueId(ctypes.byref(unique_id)))
        return unique_id

    def ncclCommInitRank(self, world_size: int, unique_id: ncclUniqueId, rank: int) -> ncclComm_t:
        comm = ncclComm_t()
        self._check(self.lib.ncclCommInitRank(ctypes.byref(comm), world_size, unique_id, rank))
        return comm
