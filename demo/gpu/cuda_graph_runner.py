"""An SGLang-shaped CUDA graph runner (``sglang/srt/model_executor/cuda_graph_runner.py``).

Only the frames matter to hangscope: ``CudaGraphRunner.capture`` ->
``CudaGraphRunner.capture_one_batch_size`` -> the model's forward, inside ``torch.cuda.graph``.
Whatever blocks below (a peer, a JIT compile, a collective) gets the outer label
"inside CUDA graph capture".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class CudaGraphRunner:
    def __init__(self, forward: Callable[[int], object], batch_sizes: Sequence[int] = (1,)):
        import torch

        self.forward = forward
        self.batch_sizes = tuple(batch_sizes)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.stream = torch.cuda.Stream()

    def capture(self) -> None:
        for bs in reversed(self.batch_sizes):
            self.graphs[bs] = self.capture_one_batch_size(bs, self.forward)

    def capture_one_batch_size(self, bs: int, forward: Callable[[int], object]):
        import torch

        # Warm up twice outside capture (cuBLAS handles, allocator), as SGLang does.
        with torch.cuda.stream(self.stream):
            for _ in range(2):
                torch.cuda.synchronize()
                forward(bs)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):
            forward(bs)
        return graph
