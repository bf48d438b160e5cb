"""User code that vLLM runs inside its Worker: a logits processor (``--logits-processors
vllm_user_code:WaitForCue``, this directory on ``PYTHONPATH``).

A request that carries ``vllm_xargs: {"wait_for_cue": 1}`` makes the processor read one line
from the FIFO named by ``HS_CUE_FIFO`` before it lets the batch go on: the shape of a real
report (a logits processor or a custom sampler blocking on I/O inside the engine, vLLM
#18537-style "server hangs on one request"), and the test can end it by writing a line.
A request with ``vllm_xargs: {"call_back": PORT}`` makes it ask the same server for a
completion from inside the step, as a tool call run by a logits processor does (vllm#13671):
the server answers only after the step, which waits for the answer. The call gives up after
``CALL_BACK_TIMEOUT_S`` (the test's way out), and the engine goes on. Other requests pass
through untouched.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

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
            if (port := (params.extra_args or {}).get("call_back")):
                call_back(int(port))

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        return logits


def read_cue() -> str:
    """Block until someone writes a line to the cue FIFO."""
    with open(os.environ["HS_CUE_FIFO"]) as cue:
        return cue.readline()


#: How long the call back waits for its answer (which comes only after the step it blocks).
CALL_BACK_TIMEOUT_S = 60.0


def call_back(port: int) -> None:
    """Ask the server this Worker computes for (a tool's completion) and wait for its answer."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as resp:
        model = json.loads(resp.read())["data"][0]["id"]
    body = {"model": model, "prompt": "tool", "max_tokens": 1}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    started = calling_back()
    started.touch()  # the test's ready signal: the call is on its way
    try:
        with urllib.request.urlopen(req, timeout=CALL_BACK_TIMEOUT_S) as resp:
            resp.read()
    except OSError:  # (TimeoutError: the test's way out)
        pass
    finally:
        started.unlink()


def calling_back() -> Path:
    """The file that exists while a call back waits (beside the cue FIFO)."""
    return Path(os.environ["HS_CUE_FIFO"]).with_name("call_back.started")
