"""User code that vLLM runs inside its Worker: a logits processor (``--logits-processors
vllm_user_code:WaitForCue``, this directory on ``PYTHONPATH``).

A request that carries ``vllm_xargs: {"wait_for_cue": 1}`` makes the processor read one line
from the FIFO named by ``HS_CUE_FIFO`` before it lets the batch go on: the shape of a real
report (a logits processor or a custom sampler blocking on I/O inside the engine, vLLM
#18537-style "server hangs on one request"), and the test can end it by writing a line.
Other requests pass through untouched.
"""

from __future__ import annotations

import os

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor


class WaitForCue(LogitsProcessor):
    def __init__(self, vllm_config: object, device: torch.device, is_pin_memory: bool) -> None:
        pass

    def is_argmax_invariant(self) -> bool:
        return True

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        # Called before every forward pass with the batch's changes, greedy or not.
        if batch_update is None:
            return
        for _index, params, _prompt, _output in batch_update.added:
            if (params.extra_args or {}).get("wait_for_cue"):
                read_cue()

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        return logits


def read_cue() -> str:
    """Block until someone writes a line to the cue FIFO."""
    with open(os.environ["HS_CUE_FIFO"]) as cue:
        return cue.readline()
